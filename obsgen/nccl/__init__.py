"""NCCL sidecar: per-rank collective timing and volume from NCCL Inspector dumps.

``obsgen nccl-exporter`` follows the directory NCCL's Inspector profiler plugin writes to,
serves the records as Prometheus metrics (``obsgen.contract``, emitter ``NCCL_EXPORTER``)
and, where it can read the files of every rank of a communicator, aligns the ranks of
each collective to find which one arrived last.

Modules: ``inspector`` (the record format and its parser), ``groups`` (the group map the
job writes, and the rules that name a communicator's parallel group), ``follow`` (files,
offsets, rotation), ``align`` (cross-rank alignment), ``metrics`` (the series and their
persisted state), ``exporter`` (the process).

What the Inspector writes
-------------------------
Sources: NVIDIA/nccl, the Inspector's README and source at v2.28.3-1
(``ext-profiler/inspector/``, its first release), v2.29.7-1 and v2.30.3-1 .. v2.30.7-1
(``plugins/profiler/inspector/``: ``inspector.cc`` for the settings, ``inspector_json.cc``
and ``json.cc`` for the records). Nothing here copies that code; the tests write records
as each version line does (tests/inspector_writer.py). The settings per version are in
docs/nccl.md (``versions.py``).

* Enabled with ``NCCL_PROFILER_PLUGIN=.../libnccl-profiler-inspector.so`` and
  ``NCCL_INSPECTOR_ENABLE=1``; a dump thread writes into ``NCCL_INSPECTOR_DUMP_DIR``
  (default ``nccl-inspector-<SLURM_JOBID>`` or ``nccl-inspector-unknown-jobid``) every
  ``NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS``. That setting changed meaning: in
  2.28-2.29 unset or 0 starts no dump thread (nothing is written); in 2.30 unset or -1
  writes only when a communicator is torn down, 0 dumps continuously. Set a positive
  interval in both. ``NCCL_INSPECTOR_DUMP_VERBOSE=1`` adds event traces;
  ``NCCL_INSPECTOR_PROM_DUMP=1`` (2.29+) writes a node_exporter textfile snapshot
  instead of JSON (not read here: it keeps the latest value per communicator, device and
  size bucket, with no sequence numbers to join ranks on).
* One file per process, ``<dump dir>/<hostname>-pid<pid>.log``, opened once with
  ``fopen(..., "w")`` and appended to for the life of the process: no rotation of its
  own. (NVIDIA's example exporter also reads ``.jsonl``; both suffixes are followed.)
* One compact JSON object per line (``\n`` after each object), flushed after every
  dump round, so a reader can see the last line cut mid-write. A collective::

    {"header": {"id": "0x7f8c496ae9f661", "comm_name": "unknown", "rank": 2,
                "n_ranks": 8, "nnodes": 1},
     "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "...",
                  "rec_mechanism": "nccl_profiler_interface",
                  "dump_timestamp_us": 1748030377748202, "hostname": "h", "pid": 1639453},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 1407,
                   "coll_msg_size_bytes": 17179869184, "coll_exec_time_us": 61974,
                   "coll_timing_source": "kernel_gpu",
                   "coll_algobw_gbs": 277.210914, "coll_busbw_gbs": 485.119099,
                   "event_trace_sn": {...}, "event_trace_ts": {...}}}

  and, 2.30+ with ``NCCL_INSPECTOR_ENABLE_P2P=1`` (the default), a Send or Recv::

     "p2p_perf": {"p2p": "Send", "p2p_sn": 88, "p2p_peer": 1,
                  "p2p_msg_size_bytes": 33554432, "p2p_exec_time_us": 812,
                  "p2p_timing_source": "kernel_gpu", "p2p_algobw_gbs": 41.3,
                  "p2p_busbw_gbs": 41.3}

  ``header.comm_name`` exists from 2.30 (``unknown`` when the communicator was given no
  name). ``header.id`` is the communicator hash printed ``0x%lx`` into 17 bytes: at most
  14 hex digits (``groups.comm_key``). ``header.rank`` and ``n_ranks`` are the rank *in
  that communicator* and its size, not the global rank; ``p2p_peer`` is a comm rank too.
  ``coll_sn`` is NCCL's sequence number per communicator *and collective function*
  (``comm->seqNumber[func]``), so collectives are joined on (id, coll, coll_sn);
  ``p2p_sn`` is one counter per communicator for both directions. ``coll_exec_time_us``
  is the longest kernel channel time from the GPU timer (``kernel_gpu``), else from host
  timestamps of the kernel events (``kernel_cpu``), else host enqueue to completion
  (``collective_cpu``). Message sizes are count x datatype size. Bandwidths are printed
  ``%lf``; a NaN is printed as the string ``"nan"``. The ``event_trace_*`` objects
  (verbose mode) are host-clock microseconds.
* What a dump holds, and what is never written (``obsgen_nccl_collectives_unrecorded_total``
  counts the gaps in the sequence numbers):

  - 2.28-2.29 keep **one** completed collective per communicator, the latest, and write
    it at the next dump round: collectives faster than the dump interval are skipped.
  - 2.30 keep a ring of completed operations per communicator
    (``NCCL_INSPECTOR_DUMP_COLL_RING_SIZE`` / ``_P2P_RING_SIZE``, 1024) and drain it at
    each dump, oldest first, so every operation is written once, unless more than the
    ring completed between two dumps (the oldest are overwritten). Not written at all:
    operations under ``NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES`` (8192; they still take a
    ``coll_sn``, so they show as gaps) and, with ``NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING=1``
    (the default), ones without GPU kernel timing.

  Bytes and durations count written operations only, and a collective can only be
  aligned when every rank wrote it.

Assumed where the sources are silent: the README's first example has no
``coll_timing_source`` (an older v4.0 build); such records are counted but not aligned,
as for ``collective_cpu``, because a host-side duration starts at enqueue, not at the
rank's arrival. Other versions than v4.x are parsed when the fields above are present.

Alignment, and why host clocks do not decide who is last
--------------------------------------------------------
A rank's kernel starts when its GPU reaches the collective (its arrival) and, for
AllReduce, AllGather and ReduceScatter, ends when the collective completes, at nearly
the same moment on every rank. So each rank's kernel time is the completion time minus
its own arrival: ranks are ordered by their kernel times, measured by each GPU's own
timer, and no host timestamp is compared across hosts. The last arrival has the shortest
kernel time; arrival skew is the longest minus the shortest; the post-last-arrival tail
is the shortest (the transfer once everyone is there, which a chunked algorithm may have
partly overlapped with the wait). A host clock offset of any size changes none of these.

The limit is the spread of completion times across ranks (ring position, the last
chunk's propagation: microseconds to tens of microseconds) plus the 1 us timer
resolution: the last arrival is only named when it arrived at least
``--arrival-resolution-us`` (25 us) after the next-to-last; closer collectives count as
aligned with no last arrival. Rooted collectives (Broadcast, Reduce) and Send/Recv do
not complete together and are not aligned.

Parallel group of a communicator
--------------------------------
``groups`` names each communicator's group: from the group map a training process
writes (``groups.write_group_map``: its global rank, world size, and each group's member
ranks in group-rank order, plus the communicator id when the caller has one), from
``--group-rule`` (size, node count, or NCCL name), or, since 2.30, from
``header.comm_name`` by the table in ``groups.COMM_NAMES`` (Megatron-LM's group
descriptions, DeviceMesh's ``mesh_<dim>``), else ``unknown``. PyTorch passes a process
group's description as the NCCL name only in versions that set
``ncclConfig_t.commName`` (PRs #124149, #191001, #192487), so the group map stays the way
that works everywhere, and the only one that gives a Send/Recv peer's global rank when
the peer runs on another host. A job rarely knows a communicator's id: PyTorch has no
public API that returns it (PR #120975, recording it through ``ncclCommGetUniqueHash``,
was declined), so the map usually leaves ``comm_id`` null and the exporter matches
(n_ranks, the comm rank of every process it sees) against the declared members, exact
once one group name fits. Send and Recv records are counted into the same
per-rank series as collectives (op ``Send``/``Recv``: the PP dashboard's send/recv
panel) and per peer (``nccl_p2p_*_total``, at most ``metrics.MAX_PEERS`` peers per rank,
op and group; the rest as ``other``).
"""

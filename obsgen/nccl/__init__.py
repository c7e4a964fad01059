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
Sources: NVIDIA/nccl ``ext-profiler/inspector/README.md`` (format version v4.0, its
examples and environment variables) and the plugin's source in the same folder
(``inspector.cc``, ``inspector_plugin.cc``, ``json.cc``), read for what the README leaves
out. Nothing here copies that code; the tests generate their own records.

* Enabled with ``NCCL_PROFILER_PLUGIN=.../libnccl-profiler-inspector.so`` and
  ``NCCL_INSPECTOR_ENABLE=1``; a dump thread writes every
  ``NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS`` (no thread, no output, when 0 or
  unset) into ``NCCL_INSPECTOR_DUMP_DIR`` (default ``nccl-inspector-<SLURM_JOBID>`` or
  ``nccl-inspector-unknown-jobid`` in the working directory).
  ``NCCL_INSPECTOR_DUMP_VERBOSE=1`` adds event traces; ``NCCL_INSPECTOR_PROM_DUMP=1``
  switches to a Prometheus textfile snapshot instead of JSON (not read here: it keeps
  only the latest collective per communicator and device).
* One file per process, ``<dump dir>/<hostname>-pid<pid>.log``, opened once with
  ``fopen(..., "w")`` and appended to for the life of the process: no rotation of its
  own. (NVIDIA's example exporter also reads ``.jsonl``; both suffixes are followed.)
* One compact JSON object per line (no spaces, ``\\n`` after each object), flushed after
  every dump round, so a reader can see the last line cut mid-write. Fields::

    {"header": {"id": "0x7f8c496ae9f661", "rank": 2, "n_ranks": 8, "nnodes": 1},
     "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "...",
                  "rec_mechanism": "nccl_profiler_interface",
                  "dump_timestamp_us": 1748030377748202, "hostname": "h", "pid": 1639453},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 1407,
                   "coll_msg_size_bytes": 17179869184, "coll_exec_time_us": 61974,
                   "coll_timing_source": "kernel_gpu",
                   "coll_algobw_gbs": 277.210914, "coll_busbw_gbs": 485.119099,
                   "event_trace_sn": {...}, "event_trace_ts": {"coll_start_ts": ...,
                   "coll_stop_ts": ..., "kernel_events": [{"channel_id": 0,
                   "kernel_start_ts": ..., "kernel_stop_ts": ..., "kernel_record_ts": ...}]}}}

  ``header.id`` is the communicator hash printed ``0x%lx``; ``header.rank`` and
  ``n_ranks`` are the rank *in that communicator* and its size, not the global rank.
  ``coll_sn`` is NCCL's sequence number per communicator *and collective function*
  (``comm->seqNumber[func]``), so records are joined on (id, coll, coll_sn).
  ``coll_exec_time_us`` is the longest kernel channel time from the GPU timer
  (``kernel_gpu``), else from host timestamps of the kernel events (``kernel_cpu``), else
  host enqueue to completion (``collective_cpu``). ``coll_msg_size_bytes`` is count x
  datatype size. Bandwidths are printed ``%lf``; a NaN is printed as the string ``"nan"``.
  The ``event_trace_*`` objects (verbose mode) are host-clock microseconds.
* The Inspector keeps **one** completed collective per communicator and writes it at the
  next dump round: with collectives faster than the dump interval, most are never
  written. Gaps in ``coll_sn`` show how many (``obsgen_nccl_collectives_unrecorded_total``);
  bytes and durations count recorded collectives only, and a collective can only be
  aligned when every rank happened to write it.

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
The Inspector writes no group name. A PyTorch job has no public API that returns the
NCCL communicator hash of a process group: PyTorch's PR #120975 (record commHash through
``ncclCommGetUniqueHash``) was declined as a non-public NCCL API, and passing the group
description as NCCL's ``commName`` (PRs #124149, #191001, #192487) reaches the profiler
plugin's init call but not the Inspector's v4.0 output. ``NCCL_DEBUG=INFO`` prints
``comm 0x<ptr> ... commId 0x<hash>`` at init, and with ``TORCH_CPP_LOG_LEVEL=INFO``
PyTorch logs which process group created ``ncclComm_ 0x<ptr>``; joining the two gives
the hash in NCCL versions where the printed commId is the communicator hash, which is
version-dependent. So ``groups.write_group_map`` records what the job does know: its
global rank, world size, and each group's name and member ranks in group-rank order
(``torch.distributed.get_process_group_ranks``), plus the communicator id when the
caller has one. The exporter names a communicator from an explicit id, else by matching
(n_ranks, the comm rank of every process it sees in it) against the declared members
(exact once the match is unique), else by ``--group-rule`` (n_ranks, nnodes), else
``unknown``.
"""

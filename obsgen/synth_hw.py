"""The hardware and platform around synthetic training jobs, as their exporters scrape it.

``Fleet`` wraps one or more ``obsgen.synth.Job`` and yields their scrapes plus the series
of what they run on, derived from the jobs' own scrapes (placement from each rank's
``node`` label, activity from its step counter), so the hardware always agrees with the
training physics without hooks into ``synth``:

* **dcgm-exporter**, one target per host: per GPU ``gpu``, ``UUID``, ``pci_bus_id``,
  ``device``, ``modelName``, the host name (``Hostname`` as releases up to 4.5.3 write
  it, ``hostname`` as its main branch does: ``dcgm_host_label``; the node name, or what
  ``dcgm_hostnames`` says a host calls itself, as a container without NODE_NAME does),
  and on Kubernetes the ``pod``, ``namespace`` and ``container`` the GPU is allocated to.
  Gauges (SM-active, temperature, power, clock-event bitmask, the *last* XID code) and
  counters (ECC, NVLink errors, uncorrectable remapped rows) as its counters CSV types
  them; ``counters="default"`` drops what dcgm-exporter's default CSV leaves out. Hosts
  exist before and after the job: a GPU a job left is idle, and its pod labels (a new
  series) go away with the pod.
* **node_exporter**, one target per host: InfiniBand bytes per HCA port (a counter, in
  bytes), the ports' line rate, and ``node_uname_info``.
* **kube-state-metrics** (Kubernetes only), one target: ``kube_pod_labels`` per live pod
  with the allowlisted job label (``ksm_job_label``: the name kube-state-metrics gives the
  pod label's key), a new ``uid`` per pod incarnation.
* Training-side series ``synth`` does not model: NCCL link recoveries (the sidecar's
  counter per rank), checkpoint bytes written (``checkpoint_cost``'s companion, counted
  with the checkpoints) and, after a restart, the recovery time and checkpoint age at
  failure from rank 0 of the new processes: the emission ``obsgen.instrument`` follows.

Series that vanish get staleness markers, as Prometheus writes them.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Iterator

from .contract import DCGM_NOT_IN_DEFAULT_CSV, L, M
from .synth import STALE, Job, Scrape, gpu_uuid

MODEL = "NVIDIA H100 80GB HBM3"
# NVML clock event (throttle) reasons, as DCGM_FI_DEV_CLOCKS_EVENT_REASONS holds them.
GPU_IDLE, SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL = 0x1, 0x4, 0x8, 0x20, 0x40


# Faults -------------------------------------------------------------------------------
@dataclass(frozen=True)
class SlowGPU:
    """GPU ``gpu`` of host ``node`` runs at SM-active ``sm_active`` while its rank trains,
    from ``start`` (a throttled GPU or a bad NVLink in a TP group), clock reasons set."""
    node: str
    gpu: int
    sm_active: float = 0.7
    start: float = 0.0
    reasons: int = HW_THERMAL


@dataclass(frozen=True)
class EccErrors:
    """``count`` uncorrectable (double-bit) ECC errors on a GPU at ``at``."""
    node: str
    gpu: int
    at: float
    count: int = 1


@dataclass(frozen=True)
class RowRemap:
    """The GPU remaps ``rows`` memory rows after uncorrectable errors at ``at`` (A100 and
    later, instead of retiring pages; dcgm-exporter's default CSV counts them)."""
    node: str
    gpu: int
    at: float
    rows: int = 1


@dataclass(frozen=True)
class Xid:
    """The GPU raises XID ``code`` at ``at``: dcgm-exporter's gauge holds it from then on
    (``at`` < 0: an old event, the gauge holds it from the first scrape)."""
    node: str
    gpu: int
    code: int
    at: float


@dataclass(frozen=True)
class IbDegraded:
    """Host ``node`` sends only ``share`` of its InfiniBand traffic from ``start`` (its
    share goes another way: TCP fallback, a rail down, a downgraded link)."""
    node: str
    share: float = 0.4
    start: float = 0.0


@dataclass(frozen=True)
class LinkRecoveries:
    """NCCL recovers a link failure of ``rank``'s communicators at each of ``at``."""
    rank: int
    at: tuple[float, ...]


# Fleet --------------------------------------------------------------------------------
@dataclass
class Fleet:
    jobs: list[Job]
    kubernetes: bool = False
    pod_per_rank: bool = False  # one pod per rank (one GPU each) instead of one per host
    namespace: str = "training"
    gpus_per_node: int | None = None  # default: the job's ranks_per_node (whole hosts)
    hcas_per_node: int = 4
    line_rate: float = 50e9  # bytes/s per port: NDR 400 Gb/s
    ib_tx: float = 12e9  # bytes/s a host sends while its ranks train (all HCAs)
    ib_idle: float = 2e6  # bytes/s of background traffic
    checkpoint_bytes: float = 5e9  # bytes each rank writes per checkpoint
    sm_active: float = 0.92
    dcgm: bool = True
    dcgm_host_label: str = L.Hostname.key  # L.hostname.key: dcgm-exporter's main branch
    dcgm_hostnames: dict[str, str] = field(default_factory=dict)  # host -> the name it reports
    counters: str = "obsgen"  # the counters CSV: obsgen's, or "default" (dcgm-exporter's own)
    ksm_job_label: str = L.label_job_id.key  # kube_pod_labels' label for the job id
    node_exporter: bool = True
    deadlines: dict[str, float] = field(default_factory=dict)  # job_id -> planned end (unix s)
    faults: tuple = ()
    seed: int = 11

    def run(self, until: float) -> Iterator[Scrape]:
        return _FleetSim(self).run(until)


def _key(name: str, **labels: str) -> tuple:
    return tuple(sorted({"__name__": name, **labels}.items()))


@dataclass
class _Rank:
    labels: dict[str, str]  # the rank's scrape labels (job, instance, job_id, rank, node)
    step: float
    ckpts: float
    ckpt_ts: float
    gen: float


@dataclass
class _JobState:
    last_step_time: float | None = None
    gen: float = 0.0
    recovery: dict[str, float] = field(default_factory=dict)  # metric key -> value
    first_step_pending: bool = False
    failed_at: float | None = None


class _FleetSim:
    def __init__(self, fleet: Fleet):
        self.f = fleet
        self.rng = random.Random(fleet.seed)

    # reading the jobs' scrapes ---------------------------------------------------------
    @staticmethod
    def ranks(scrape: Scrape, job: Job) -> dict[int, _Rank]:
        """Live ranks of ``job`` in a scrape, from the gauges every rank serves."""
        out: dict[int, dict] = {}
        want = {M.train_world_size.key, M.train_current_step.key,
                M.train_checkpoint_timestamp_seconds.key, M.train_run_id.key}
        counters = {M.train_checkpoint_total.key}
        for key, value in scrape.samples.items():
            labels = dict(key)
            name = labels.pop("__name__")
            if value == STALE or labels.get(L.job_id.key) != job.job_id:
                continue
            if name in want or name in counters:
                r = out.setdefault(int(labels[L.rank.key]), {})
                r[name] = value
                if name == M.train_world_size.key:
                    r["labels"] = labels
        return {rank: _Rank(v["labels"], v[M.train_current_step.key],
                            v.get(M.train_checkpoint_total.key, 0.0),
                            v[M.train_checkpoint_timestamp_seconds.key], v[M.train_run_id.key])
                for rank, v in out.items() if "labels" in v}

    def run(self, until: float) -> Iterator[Scrape]:
        f = self.f
        streams = [list(j.run(until)) for j in f.jobs]
        # Every host any job ever runs on exists for the whole time.
        hosts: dict[str, int] = {}
        for job, scrapes in zip(f.jobs, streams):
            for s in scrapes:
                for r in self.ranks(s, job).values():
                    hosts.setdefault(r.labels[L.node.key], job.ranks_per_node)
        gpus = {h: max(n, f.gpus_per_node or 0) for h, n in hosts.items()}
        host_ip = {h: f"10.200.{i // 250}.{i % 250 + 1}" for i, h in enumerate(sorted(hosts))}
        counters: dict[tuple, float] = {}
        xid = {(x.node, x.gpu): x.code for x in f.faults if isinstance(x, Xid) and x.at < 0}
        prev: list[dict[int, _Rank]] = [{} for _ in f.jobs]
        states = [_JobState() for _ in f.jobs]
        live: set[tuple] = set()
        for i, scrapes in enumerate(zip(*streams)):
            t = scrapes[0].time
            dt = t - prev_t if i else 0.0
            out = Scrape(t)
            for s in scrapes:
                out.samples.update(s.samples)
            placement: dict[tuple[str, int], tuple[Job, int, bool]] = {}  # (host, gpu) -> job, rank, active
            for j, (job, s) in enumerate(zip(f.jobs, scrapes)):
                now = self.ranks(s, job)
                self._training_side(job, states[j], prev[j], now, t, out, counters)
                for rank, r in now.items():
                    active = rank in prev[j] and r.step > prev[j][rank].step
                    placement[(r.labels[L.node.key], rank % job.ranks_per_node)] = (job, rank, active)
                prev[j] = now
            for x in f.faults:
                if isinstance(x, Xid) and 0 <= x.at <= t:
                    xid[(x.node, x.gpu)] = x.code
            for host in sorted(hosts):
                if f.dcgm:
                    self._dcgm(host, gpus[host], host_ip[host], placement, xid, t, out)
                if f.node_exporter:
                    self._node(host, host_ip[host], placement, t, dt, out, counters)
            if f.kubernetes:
                self._pods(placement, out)
            now_keys = set(out.samples)
            for key in live - now_keys:
                out.samples[key] = STALE
            live = {k for k, v in out.samples.items() if v != STALE}
            prev_t = t
            yield out

    # training-side series ---------------------------------------------------------------
    def _training_side(self, job: Job, st: _JobState, before: dict[int, _Rank],
                       now: dict[int, _Rank], t: float, out: Scrape, counters: dict) -> None:
        f = self.f
        stepped = any(r.step > before[k].step for k, r in now.items() if k in before)
        gen = max((r.gen for r in now.values()), default=None)
        if gen is not None and gen > st.gen:  # new processes after a restart
            st.gen, st.first_step_pending, st.failed_at = gen, True, st.last_step_time
        if st.first_step_pending and stepped:
            # rank 0 of the new processes, at its first completed step
            st.first_step_pending = False
            resumed_from = max(r.ckpt_ts for r in now.values())
            if st.failed_at is not None:
                st.recovery = {M.job_recovery_seconds.key: t - st.failed_at,
                               M.job_checkpoint_age_at_failure_seconds.key:
                                   max(st.failed_at - resumed_from, 0.0)}
        if stepped:
            st.last_step_time = t
        for rank, r in now.items():
            base = r.labels
            out.samples[_key(M.checkpoint_bytes_written_total.key, **base)] = r.ckpts * f.checkpoint_bytes
            # The sidecar's counter starts from 0 with the process it watches.
            born = counters.setdefault(("process", job.job_id, base[L.instance.key]), t)
            n = sum(1 for x in f.faults if isinstance(x, LinkRecoveries) and x.rank == rank
                    for a in x.at if born < a <= t)
            out.samples[_key(M.nccl_link_recovery_total.key, **base)] = float(n)
            if job.job_id in f.deadlines:
                out.samples[_key(M.train_planned_end_timestamp_seconds.key, **base)] = f.deadlines[job.job_id]
            if rank == 0:
                for name, value in st.recovery.items():
                    out.samples[_key(name, **base)] = round(value, 3)

    # dcgm-exporter ------------------------------------------------------------------------
    def _dcgm(self, host: str, n: int, ip: str, placement: dict, xid: dict, t: float,
              out: Scrape) -> None:
        f = self.f
        for g in range(n):
            job, rank, active = placement.get((host, g), (None, None, False))
            labels = {L.job.key: "dcgm-exporter", L.instance.key: f"{ip}:9400",
                      L.gpu.key: str(g), L.UUID.key: gpu_uuid(host, g),
                      "pci_bus_id": f"00000000:{0x18 + 0x10 * g:02X}:00.0",
                      "device": f"nvidia{g}", "modelName": MODEL,
                      f.dcgm_host_label: f.dcgm_hostnames.get(host, host)}
            if f.kubernetes and job is not None:
                labels.update({L.pod.key: self._pod(job, rank, host),
                               L.namespace.key: f.namespace, L.container.key: "pytorch"})
            sm, reasons = 0.0, GPU_IDLE
            if active:
                sm, reasons = f.sm_active + self.rng.gauss(0, 0.006), 0
                for x in f.faults:
                    if isinstance(x, SlowGPU) and x.node == host and x.gpu == g and t >= x.start:
                        sm, reasons = x.sm_active + self.rng.gauss(0, 0.006), x.reasons
            sm = min(max(sm, 0.0), 1.0)
            gauges = {
                M.DCGM_FI_PROF_SM_ACTIVE.key: round(sm, 4),
                M.DCGM_FI_DEV_GPU_TEMP.key: 38.0 + 40.0 * round(sm, 1),
                M.DCGM_FI_DEV_POWER_USAGE.key: 90.0 + 600.0 * round(sm, 1),
                M.DCGM_FI_DEV_CLOCKS_EVENT_REASONS.key: float(reasons),
                M.DCGM_FI_DEV_XID_ERRORS.key: float(xid.get((host, g), 0)),
                M.DCGM_FI_PROF_NVLINK_TX_BYTES.key: 1.2e11 * round(sm, 1),
                M.DCGM_FI_PROF_NVLINK_RX_BYTES.key: 1.2e11 * round(sm, 1),
            }
            # Counters come from the driver: they survive pod and job changes.
            dbe = sum(x.count for x in f.faults if isinstance(x, EccErrors) and x.node == host
                      and x.gpu == g and x.at <= t)
            rows = sum(x.rows for x in f.faults if isinstance(x, RowRemap) and x.node == host
                       and x.gpu == g and x.at <= t)
            counters = {M.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL.key: float(dbe),
                        M.DCGM_FI_DEV_ECC_SBE_VOL_TOTAL.key: 0.0,
                        M.DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS.key: float(rows),
                        M.DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL.key: 0.0,
                        M.DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL.key: 0.0}
            for name, v in {**gauges, **counters}.items():
                if f.counters == "default" and name in DCGM_NOT_IN_DEFAULT_CSV:
                    continue
                out.samples[_key(name, **labels)] = v

    # node_exporter ------------------------------------------------------------------------
    def _node(self, host: str, ip: str, placement: dict, t: float, dt: float, out: Scrape,
              counters: dict) -> None:
        f = self.f
        base = {L.job.key: "node", L.instance.key: f"{ip}:9100"}
        out.samples[_key(M.node_uname_info.key, **base, nodename=host, sysname="Linux",
                         release="5.15.0-105-generic", machine="x86_64",
                         domainname="(none)", version="#115-Ubuntu SMP")] = 1.0
        busy = any(active for (h, _), (_, _, active) in placement.items() if h == host)
        rate = f.ib_tx if busy else f.ib_idle
        for x in f.faults:
            if isinstance(x, IbDegraded) and x.node == host and t >= x.start and busy:
                rate *= x.share
        for h in range(f.hcas_per_node):
            port = {L.device.key: f"mlx5_{h}", L.port.key: "1"}
            ck = _key(M.node_infiniband_port_data_transmitted_bytes_total.key, **base, **port)
            counters[ck] = counters.get(ck, 1e12 * (h + 1)) + rate / f.hcas_per_node * dt
            out.samples[ck] = float(round(counters[ck]))
            out.samples[_key(M.node_infiniband_rate_bytes_per_second.key, **base, **port)] = f.line_rate

    # Kubernetes ---------------------------------------------------------------------------
    def _pod(self, job: Job, rank: int, host: str) -> str:
        if self.f.pod_per_rank:
            return f"{job.job_id}-worker-{rank}"
        return f"{job.job_id}-worker-{rank // job.ranks_per_node}"

    def _pods(self, placement: dict, out: Scrape) -> None:
        f = self.f
        pods = {}
        for (host, _), (job, rank, _) in placement.items():
            if job is not None:
                pods[self._pod(job, rank, host)] = (job, host)
        for pod, (job, host) in sorted(pods.items()):
            uid = hashlib.md5(f"{pod}/{host}".encode()).hexdigest()
            uid = f"{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:32]}"
            out.samples[_key(M.kube_pod_labels.key, **{
                L.job.key: "kube-state-metrics", L.instance.key: "10.96.12.7:8080",
                L.namespace.key: f.namespace, L.pod.key: pod, L.uid.key: uid,
                f.ksm_job_label: job.job_id})] = 1.0

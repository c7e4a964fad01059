"""GPU health: uneven tensor-parallel GPUs, uncorrectable memory errors and GPUs that no
job can be matched to, per job.

dcgm-exporter publishes GPUs, not jobs: every series carries ``gpu``, ``UUID`` and the
host name, labelled ``Hostname`` by every release up to 4.5.3 and ``hostname`` on its
main branch (#655); the rules read whichever a series has, so an upgrade needs no config
change. The host name is the exporter's ``NODE_NAME`` environment variable where set
(its Helm chart sets it to the Kubernetes node name), else the exporter's own host name:
under Docker or a Slurm prolog that is the container's, which no rank reports, unless
the exporter runs with ``--net host`` or ``-e NODE_NAME=$(hostname)``. Train_GPU_Unmapped
says when the job's hosts are missing from dcgm-exporter's series.

On Kubernetes, dcgm-exporter adds the ``pod``, ``namespace`` and ``container`` a GPU is
allocated to only when it runs with ``--kubernetes`` (``-k``) and the kubelet's
pod-resources socket mounted, as its Helm chart does; a plain container or DaemonSet
without them leaves the pod labels out, and the host map below is used. GPUs are mapped
to jobs two ways, the better one per host:

* **Kubernetes**: dcgm-exporter's ``pod`` and ``namespace`` joined to kube-state-metrics'
  ``kube_pod_labels``, which carries the pod label holding the job id once it is
  allowlisted (``--metric-labels-allowlist=pods=[<label>]``); set ``pod_job_label`` to
  the label's key and obsgen reads it under the name kube-state-metrics gives it (the key
  sanitised and snake-cased: ``training.kubeflow.org/jobName`` becomes
  ``label_training_kubeflow_org_job_name``). Exact per GPU: idle GPUs and other jobs'
  GPUs on the host stay out. Behind a ServiceMonitor without ``honorLabels: true``,
  Prometheus renames dcgm-exporter's ``pod`` to ``exported_pod``: rename the labels
  accordingly.
* **Bare metal and Slurm**: the hosts the job's ranks report in their own ``node`` label
  (``job_node:train_ranks:count``), used for hosts without a pod mapping. It takes every
  GPU of the host, which is right for jobs that own whole hosts (a pretraining run); a
  host shared by two jobs counts for both.

dcgm-exporter's default counters CSV leaves out what the TP-imbalance alert and several
panels read (``DCGM_FI_PROF_SM_ACTIVE``, the ECC totals and NVLink error counters are
commented out; ``DCGM_FI_PROF_NVLINK_TX_BYTES`` / ``_RX_BYTES`` and
``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` are not listed at all). Run it with
``examples/dcgm-exporter/obsgen-counters.csv``, generated from the contract: its defaults
plus those fields. The ECC alert does not wait for it: it also reads the uncorrectable
remapped-rows counter and the XID gauge, both on by default.

The reference document's rule (section 5) takes ``stddev by (pod)``: with one GPU per pod
the deviation of one value is 0 and it never fires, and its ``group_left()`` copies no job
label, so nobody knows whose GPUs they are. Here the spread is taken per job and host.

XID errors are read as dcgm-exporter publishes them: ``DCGM_FI_DEV_XID_ERRORS`` is a
gauge holding the *last* XID code of the GPU, not a count. An XID counts when the gauge
changed to one of the configured uncorrectable-memory codes within the window; a code
that has sat there since an old event does not fire again (the ECC counter catches a
repeat of the same code). Both signals keep the alert firing for ``windows.gpu_errors``.
Each GPU's counters are read over the rate window only, and the error window over the
records of the few GPUs that had an event, so the ECC value given is the most errors the
GPU had in one rate window (an hour of every GPU's raw samples was the group's main cost).

## Train_TP_Imbalance

The SM-active of the job's GPUs on one host spreads wider than the threshold (standard
deviation across the GPUs) for 15 minutes. Tensor parallelism splits every layer across
the GPUs of a host, so they should be equally busy: one GPU far from the others is doing
more or less work than its peers, and every TP collective waits for the slowest.

Fires after the fault, with the default windows: 15 min.

Check first:
1. The odd GPU in dcgm-exporter on that host: clock event reasons (thermal or power slowdown), temperature, power against its peers, XID and ECC errors.
2. NVLink health of that GPU: CRC and recovery error counters, NVLink throughput against its peers (a degraded link slows every TP collective through it).
3. The model's sharding: attention heads or hidden size not divisible by the TP size give one rank more work on every step; compare with a run on other hosts.

## Train_GPU_ECC

A GPU of the job reported uncorrectable memory errors: its double-bit ECC counter rose,
it remapped memory rows after uncorrectable errors (row remapping, A100 and later: on in
dcgm-exporter's default counters, where the ECC totals are not), or its XID gauge changed to an uncorrectable-memory code (48 double-bit ECC, 64 row
remapping failure, 94 contained, 95 uncontained ECC error). The data in that GPU's memory
may be wrong: gradients and optimizer state computed since are suspect, and the GPU needs
a reset at least.

Fires after the fault, with the default windows: the next evaluation.

Check first:
1. Drain the host from the scheduler (cordon the node, or scontrol update state=drain) so the restart does not land on it again.
2. The job's loss and gradient norm since the error: an uncontained error (XID 95) or DBE can corrupt the state that is checkpointed next; resume from a checkpoint written before the error if the curves moved.
3. nvidia-smi -q -d ECC,ROW_REMAPPER on the host: pending row remaps need a GPU reset; repeated errors or a remapping failure mean RMA.

## Train_GPU_Unmapped

Some hosts the job's ranks report (their ``node`` label) have no GPU in dcgm-exporter's
series under that host name for 15 minutes, while dcgm-exporter does report GPUs
elsewhere. On those hosts the GPU alerts cannot see the job: a slow, hot or failing GPU
there raises nothing. Either dcgm-exporter does not run on the hosts, or it names them
differently from the ranks.

Fires after the fault, with the default windows: 16 min after the job starts.

Check first:
1. The host names on both sides: `count by (Hostname, hostname) (DCGM_FI_DEV_GPU_TEMP)` against the ranks' `node` values on the job's series; a container ID, a short name against a fully qualified one, or an IP means a mismatch.
2. Off Kubernetes (Docker, Slurm, systemd), start dcgm-exporter with `-e NODE_NAME=$(hostname)` (or `--net host`) and give the ranks the same name (obsgen.instrument takes it from NODE_NAME too, else the host name); on Kubernetes the Helm chart sets NODE_NAME from the node name, as the ranks' downward API does.
3. That dcgm-exporter runs on every GPU host the job uses (a DaemonSet whose node selector or tolerations leave some hosts out), and that Prometheus scrapes it there.
"""
from __future__ import annotations

from ..contract import L, M, R
from ..model import Alert, Family, Record, expr
from ..config import duration, seconds
from ..promql import Ctx, number, quote

NAME = "gpus"


HOST = (L.Hostname, L.hostname)  # dcgm-exporter's host label: releases, then main (#655)


def to_node(c: Ctx, e: str) -> str:
    """``e`` (dcgm-exporter labels) with its host name copied into the contract's node
    label, from ``Hostname`` (releases up to 4.5.3) or ``hostname`` (main since #655),
    whichever the series carries: a series has one of them, and the two joined with no
    separator are that one. One label_join, where a label_replace per label built every
    GPU's label set twice."""
    return (f'label_join({e}, {quote(c.l(L.node))}, "", {quote(c.l(L.Hostname))}, '
            f'{quote(c.l(L.hostname))})')


def per_gpu(c: Ctx, e: str) -> str:
    """One series per GPU (host, gpu, UUID) of a dcgm-exporter expression: the pod labels
    and a second scrape of the same exporter collapse."""
    return to_node(c, f"max {c.by(*HOST, L.gpu, L.UUID)} ({e})")


def owned(c: Ctx, gpu_signal: str, host_signal: str) -> str:
    """A per-GPU signal (node, gpu, UUID, signal) attributed to jobs: through the
    Kubernetes pod map where the host has one, else to every job whose ranks run on the
    host (``host_signal``: at most one series per node, naming its worst GPU)."""
    gpus = c.r(R.job_gpus)
    indent = lambda e: e.replace("\n", "\n  ")
    return "\n".join((
        "(",
        f"  {gpus}",
        f"  * {c.join((L.node, L.gpu, L.UUID), (L.signal,))}",
        f"  ({indent(gpu_signal)})",
        ")",
        "or",
        "(",
        f"  {c.r(R.job_nodes)} * 0",
        f"  + {c.join((L.node,), (L.gpu, L.UUID, L.signal))}",
        f"  ({indent(host_signal)})",
        f"  unless {c.on(L.node)}",
        f"  {gpus}",
        ")"))


def build(c: Ctx) -> Family:
    t = c.cfg["thresholds"]
    gpu_errors, rate = c.w("gpu_errors"), c.w("rate")
    # an event stays in the rate-window records for one rate window, then in this one
    sticky = duration(max(seconds(gpu_errors) - seconds(rate), seconds(rate)))
    job, node = c.tl(L.job_id), c.tl(L.node)
    xid = c.m(M.DCGM_FI_DEV_XID_ERRORS)
    recent_codes = " or ".join(f"{c.r(R.gpu_xid_recent)} == {number(code)}"
                               for code in t["gpu_ecc_xids"])
    sm = per_gpu(c, c.m(M.DCGM_FI_PROF_SM_ACTIVE))
    ksm = c.m(M.kube_pod_labels, extra=(f'{c.l(L.label_job_id)}!=""',))
    gpu_where = ("{{ with $labels.%s }}GPU {{ . }} {{ end }}"
                 "{{ with $labels.%s }}({{ . }}) {{ end }}") % (c.l(L.gpu), c.l(L.UUID))

    def signal(e: str, name: str) -> str:
        return f'label_replace({e}, {quote(c.l(L.signal))}, {quote(name)}, "", "")'

    # the error signals in order: a GPU is named once, by the first that has it
    errors = (signal(c.r(R.gpu_dbe), "ecc_dbe"), signal(c.r(R.gpu_remap), "remapped_rows"),
              signal(c.r(R.gpu_xid_ecc), "xid"))

    def first(on: tuple, pick=lambda e: e) -> str:
        return "\nor\n".join(
            "(" + " unless ".join([pick(e)] + [f"{c.on(*on)} {prev}" for prev in errors[:i]]) + ")"
            if i else pick(e) for i, e in enumerate(errors))
    rules = (
        Record(c.rname(R.job_nodes), expr(f"""
            count {c.by(L.job_id, L.node)} ({c.m(M.train_world_size, extra=(f'{c.l(L.node)}!=""',))})
        """), fact=True),
        # The hosts dcgm-exporter reports GPUs on, under its host label (GPU temperature is
        # in its default counters CSV): the ranks' hosts are looked up in it.
        Record(c.rname(R.gpu_nodes), expr(f"""
            sum {c.by(L.node)} ({to_node(c, f"count {c.by(*HOST)} (max {c.by(*HOST, L.gpu, L.UUID)} ({c.m(M.DCGM_FI_DEV_GPU_TEMP)}))")})
        """), fact=True),
        Record(c.rname(R.job_gpus), expr(f"""
            group {c.by(L.job_id, L.node, L.gpu, L.UUID)} (
              label_replace(
                {to_node(c, c.m(M.DCGM_FI_DEV_GPU_TEMP, extra=(f'{c.l(L.pod)}!=""',)))}
                * {c.join((L.namespace, L.pod), (L.label_job_id,))}
                max {c.by(L.namespace, L.pod, L.label_job_id)} ({ksm}),
                {quote(c.l(L.job_id))}, "$1", {quote(c.l(L.label_job_id))}, "(.+)"
              )
            )
        """), fact=True),
        Record(c.rname(R.sm_active_spread), expr(f"""
            stddev {c.by(L.job_id, L.node)} (
              {c.r(R.job_gpus)}
              * {c.join((L.node, L.gpu, L.UUID))}
              {sm}
            )
            or
            (
              {c.r(R.job_nodes)} * 0
              + {c.join((L.node,))}
              {to_node(c, f"stddev {c.by(*HOST)} (max {c.by(*HOST, L.gpu, L.UUID)} ({c.m(M.DCGM_FI_PROF_SM_ACTIVE)}))")}
              unless {c.on(L.node)}
              {c.r(R.job_gpus)}
            )
        """)),
        # Each GPU's counters over the rate window only, filtered before they are
        # aggregated, and recorded for the few GPUs with an event: the error window reads
        # those sparse records. An hour of every GPU's raw samples, and the code list
        # compared on every GPU's gauge (one "or" over all GPUs per code), were the
        # group's main cost; the codes are now compared on the GPUs that changed only.
        Record(c.rname(R.gpu_dbe_recent), expr(f"""
            {per_gpu(c, f"increase({c.m(M.DCGM_FI_DEV_ECC_DBE_VOL_TOTAL)}[{rate}]) > 0")}
        """)),
        Record(c.rname(R.gpu_remap_recent), expr(f"""
            {per_gpu(c, f"increase({c.m(M.DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS)}[{rate}]) > 0")}
        """)),
        Record(c.rname(R.gpu_remap), expr(f"""
            max_over_time({c.r(R.gpu_remap_recent)}[{sticky}])
        """)),
        Record(c.rname(R.gpu_xid_changed), expr(f"""
            {per_gpu(c, f"changes({xid}[{rate}]) > 0")}
        """)),
        Record(c.rname(R.gpu_dbe), expr(f"""
            max_over_time({c.r(R.gpu_dbe_recent)}[{sticky}])
        """)),
        Record(c.rname(R.gpu_xid_recent), expr(f"""
            {per_gpu(c, f"{xid} and {c.on(*HOST, L.gpu, L.UUID)} max_over_time({c.r(R.gpu_xid_changed)}[{sticky}])")}
        """)),
        Record(c.rname(R.gpu_xid_ecc), expr(f"""
            {recent_codes}
        """)),
        Alert(
            name="Train_TP_Imbalance",
            expr=expr(f"""
                {c.r(R.sm_active_spread)} > {c.t('tp_sm_active_stddev')}
            """),
            for_="15m",
            severity="warning",
            role="platform",
            summary=f"Uneven SM-active across the GPUs of node {node} in job {job}",
            description=(
                f"The GPUs of job {job} on node {node} differ in SM-active by a standard "
                'deviation of {{ printf "%.3f" $value }} (limit '
                f"{number(t['tp_sm_active_stddev'])}): one GPU of the tensor-parallel group "
                "works more or less than its peers, and every TP collective waits for it."),
        ),
        Alert(
            name="Train_GPU_ECC",
            expr=owned(c, first((L.node, L.gpu, L.UUID)),
                       first((L.node,), lambda e: f"topk {c.by(L.node)} (1, {e})")),
            for_="0s",
            severity="critical",
            role="platform",
            summary=f"Uncorrectable GPU memory errors on node {node} of job {job}",
            description=(
                f"{gpu_where}on node {node}, which runs job {job}, reported "
                f"{{{{ $labels.{c.l(L.signal)} }}}} {{{{ $value }}}} in the last {gpu_errors} "
                f"(ecc_dbe: uncorrectable ECC errors, the most in one {rate}; remapped_rows: "
                f"memory rows it remapped after uncorrectable errors, the most in one {rate}; "
                "xid: the XID code it raised). Its memory may hold wrong values: drain the host and check "
                "the job's state."),
        ),
        # Expected unless observed: the hosts the job's ranks report, less the hosts
        # dcgm-exporter reports GPUs on, while it reports GPUs on some host (a cluster
        # without dcgm-exporter is not paged for it).
        Alert(
            name="Train_GPU_Unmapped",
            expr=expr(f"""
                count {c.by(L.job_id)} (
                  {c.r(R.job_nodes)} unless {c.on(L.node)} {c.r(R.gpu_nodes)}
                )
                and on() (count({c.r(R.gpu_nodes)}) > 0)
            """),
            for_="15m",
            severity="warning",
            role="platform",
            summary=f"GPUs of job {job} are not in dcgm-exporter's series",
            description=(
                f"{{{{ $value }}}} of the hosts the ranks of job {job} report in their "
                f"{c.l(L.node)} label have no GPU in dcgm-exporter's series under that host "
                "name, so the GPU alerts (TP imbalance, ECC) and panels are blind for them: "
                "dcgm-exporter is missing on those hosts, or labels them with another name "
                "(off Kubernetes it uses NODE_NAME, else its own, a container's, host name)."),
        ),
    )
    return Family(NAME, __doc__, rules)

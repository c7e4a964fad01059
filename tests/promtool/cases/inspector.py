"""Inspector cases (the nccl-inspector preset): the NCCL Inspector's own textfile, as
node_exporter serves it (tests/inspector_prom_writer.py, from NCCL v2.30.7-1's
inspector_prom.cc), mapped to the ranks by obsgen.instrument's ``train_rank_gpu_info``.
Two hosts of four ranks; one TP communicator per host, one DP communicator across them.
Every value is computed here from what the writer writes, rounded to a nanosecond (or a
billionth of a GB/s) in the query and here alike."""
import math

from ..support import Case, Value
from ...inspector_prom_writer import InspectorJob, size_range

TIME = "job_rank_comm:nccl_inspector_exec_seconds:mean"
BUSBW = "job_rank_comm:nccl_inspector_bus_bandwidth_gbs:gmean"
TO = 1e-9
TP, DP = size_range(8 << 20), size_range(16 << 20)


def rounded(v: float) -> float:
    inv = 1.0 / TO
    return math.floor(v * inv + 0.5) / inv


def check(minute: float, record: str, samples: dict[tuple, float]) -> Value:
    """``round(record, TO)`` at ``minute`` is ``samples`` ({(rank, comm, size): value})."""
    return Value(minute, f"round({record}, {TO})", {
        "{" + ", ".join(f'{k}="{v}"' for k, v in (
            ("job_id", "llm-a"), ("rank", str(rank)), ("comm_name", comm),
            ("collective", "AllReduce"), ("message_size", size))) + "}": rounded(v)
        for (rank, comm, size), v in samples.items()})


def times(job: InspectorJob, ranks=range(8)) -> dict[tuple, float]:
    """Each rank's mean time per collective in seconds, as the writer dumps it."""
    out = {}
    for r in ranks:
        tp, dp = job.dumps(r)
        out[(r, "tp", TP)] = tp[2] * 0.000001
        out[(r, "dp", DP)] = dp[2] * 0.000001
    return out


SLOW = InspectorJob(slow=(1, 1.5))
TORN = InspectorJob(torn=(120.0, 150.0))
ENDED = InspectorJob(ends=300.0)
NO_BUSBW = InspectorJob(no_busbw=True)

CASES = {
    "each rank's own host name and CUDA device map the Inspector's series to it: the slow "
    "rank 1 has the least time per TP collective, its host's peers wait for it":
        Case([SLOW], 4, [
            check(1, TIME, times(SLOW)),
            check(4, TIME, times(SLOW)),
            check(4, BUSBW, {k: (180.0 if k[1] == "tp" else 42.5) for k in times(SLOW)}),
        ]),
    "one GPU per process (CUDA_VISIBLE_DEVICES per task): every rank of a host writes GPU0, "
    "so no series is mapped to any rank":
        Case([InspectorJob(one_gpu_per_process=True)], 4, [
            Value(2, f"round({TIME}, {TO})", {}), Value(4, f"round({BUSBW}, {TO})", {})]),
    "two scrapes in a row meet a half-written file (its series marked stale): each rank "
    "keeps its newest dump":
        Case([TORN], 4, [check(2, TIME, times(TORN)), check(2.5, TIME, times(TORN))]),
    "a job that ended leaves its files behind and node_exporter keeps serving them: no "
    "rank is named from them once the ranks' gpu info is gone":
        Case([ENDED], 8, [check(4.5, TIME, times(ENDED)), Value(6, f"round({TIME}, {TO})", {}),
                          Value(8, f"round({TIME}, {TO})", {})]),
    "a dump whose DP collectives carried no bus bandwidth (written 0) leaves that bucket "
    "out of the bus bandwidth, not its time":
        Case([NO_BUSBW], 3, [
            check(3, BUSBW, {k: 180.0 for k in times(NO_BUSBW) if k[1] == "tp"}),
            check(3, TIME, times(NO_BUSBW))]),
}

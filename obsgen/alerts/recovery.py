"""Recovery: jobs stuck restarting, and checkpoint storage too slow to save them.

A restart is a new restart generation (``train_run_id``) of the job. Restarts are counted
as the generation's rise within the window, from a recorded series kept over the gaps
while the job is down, so a restart whose processes died before being scraped still
counts. "No checkpoint progress" means the job's last checkpoint time did not move
within the window: each restart resumed from the same checkpoint and lost the same work
again (instrument reports the checkpoint it resumed from, not its own start, after a
restart).

Checkpoint write throughput is the job's checkpoint bytes over the time its ranks spent
writing (``checkpoint_bytes_written_total`` over ``train_checkpoint_seconds_total``,
summed over the ranks' restarts; the bytes of all ranks over the seconds of the rank
that waited longest, since a synchronous save holds every rank). It exists only for
windows that contain a checkpoint, which is when storage matters.

## Train_RestartLoop

The job restarted several times within the window and none of its restarts got as far
as a new checkpoint. It burns GPU hours redoing the same steps and will not make progress
by itself; whatever kills it (a bad host, a corrupt checkpoint, a code or config change,
a deterministic NaN) comes back every time.

Fires after the fault, with the default windows: once the resumed checkpoint is 1h old.

Check first:
1. The exit reason of the last attempts (scheduler events, the first rank that died, its last log lines): the same host, the same step, or the same error each time?
2. Hardware of the hosts the job landed on: XID and ECC errors, NCCL link recoveries, a host that appears in every attempt; exclude it (node selector, --exclude) before the next restart.
3. The checkpoint it resumes from: load errors, a checkpoint written during a fault (NaN in the state); fall back to the one before and stop automatic restarts until the cause is known.

## Train_CheckpointStorage_Slow

Checkpoints of the job were written at less than the configured floor (bytes per second
spent writing) over the window. Every second of a synchronous checkpoint stalls all GPUs
of the job, and a slow save makes operators checkpoint less often, so a failure loses more.

Fires after the fault, with the default windows: at the first slow checkpoint.

Check first:
1. The storage backend during the checkpoint: filesystem or object-store write latency and throughput (NFS, Lustre, GPFS, S3), other jobs writing at the same time, quota or capacity near the limit.
2. Whether the job writes through one rank (gathering to rank 0) or from every rank in parallel (sharded, PyTorch DCP / Megatron distributed checkpoint), and the number of files it creates.
3. Async checkpointing (Megatron --async-save, DCP async_save) so training continues while the data drains to storage, and the checkpoint interval against sqrt(2 x MTBF x checkpoint cost).
"""
from __future__ import annotations

from ..contract import L, M, R
from ..model import Alert, Family, Record, expr
from ..promql import Ctx, number

NAME = "recovery"
REQUIRES = ("checkpoints",)  # reads its checkpoint time, seconds and bytes records


def build(c: Ctx) -> Family:
    t = c.cfg["thresholds"]
    loop, throughput = c.w("restart_loop"), c.w("checkpoint_throughput")
    job = c.tl(L.job_id)
    run = c.r(R.run_id)
    last = c.r(R.checkpoint_last)
    floor = t["checkpoint_write_bytes_per_second"]
    rules = (
        Record(c.rname(R.run_id), expr(f"""
            max {c.by(L.job_id)} ({c.m(M.train_run_id)})
        """)),
        # Over the throughput window from the checkpoints family's job-level records of the
        # rate window, both from one group: a record of this group would be one
        # evaluation ahead of the other and skew the ratio while a checkpoint completes.
        Record(c.rname(R.checkpoint_throughput), expr(f"""
            sum_over_time({c.r(R.checkpoint_bytes_rate)}[{throughput}])
            /
            (sum_over_time({c.r(R.checkpoint_seconds_rate)}[{throughput}]) > 0)
        """)),
        Alert(
            name="Train_RestartLoop",
            expr=expr(f"""
                (max_over_time({run}[{loop}]) - min_over_time({run}[{loop}]))
                >= {number(t['restart_loop_restarts'])}
                unless {c.on(L.job_id)}
                (max_over_time({last}[{loop}]) > min_over_time({last}[{loop}]))
            """),
            for_="0s",
            severity="critical",
            role="platform",
            summary=f"Job {job} is in a restart loop",
            description=(
                f"Job {job} restarted {{{{ $value }}}} times in the last {loop} without "
                "completing a checkpoint: every attempt resumes from the same checkpoint and "
                "dies before the next one. It will not make progress by itself."),
        ),
        Alert(
            name="Train_CheckpointStorage_Slow",
            expr=expr(f"""
                {c.r(R.checkpoint_throughput)} < {number(floor)}
            """),
            for_="0s",
            severity="warning",
            role="platform",
            summary=f"Checkpoint storage is slow for job {job}",
            description=(
                f"Job {job} wrote its checkpoints at {{{{ $value | humanize }}}}B/s over the "
                f"last {throughput} (floor {number(floor)} B/s): storage holds up every "
                "synchronous save, and all GPUs of the job wait for it."),
        ),
    )
    return Family(NAME, __doc__, rules, requires=REQUIRES)

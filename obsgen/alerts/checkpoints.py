"""Checkpoints: a missed checkpoint loses hours, a slow one wastes GPU time every time.

Both rules are evaluated per job. The reference document takes a global ``max`` of the
checkpoint timestamp, so one job that checkpoints hides every other job that stopped;
here the timestamp is aggregated ``by (job_id)`` and only jobs still making progress are
judged (a finished or stopped job is not "missing" checkpoints). Overhead is the
checkpoint seconds of the rank that spends the most on them per training second of the
job's ranks (which train in lockstep): ranks that do not write checkpoints (when only
rank 0 saves) do not dilute it. Both are recorded per job over the rate window and
averaged over the overhead window from those records, never from an hour of every
rank's counters.

## Train_NoCheckpoints

A job that is still training has not completed a checkpoint for longer than the
configured maximum age. A failure now loses all the work since the last checkpoint.

Fires after the fault, with the default windows: 2 min after the limit.

Check first:
1. The training log of the rank that saves: a checkpoint that errors, hangs on storage, or was disabled by a config change (save interval, save path).
2. Storage: free space and quota on the checkpoint volume, object-store errors, write throughput of the shared filesystem (NFS, Lustre).
3. Whether the job restarted with checkpointing turned off or with a save interval far longer than intended.

## Train_CheckpointOverhead

Writing checkpoints takes more than the overhead ratio of training time over the window.
Every second spent saving is a second all GPUs of the job stand still.

Fires after the fault, with the default windows: about 1h20m: its 1h window, then its
15m for.

Check first:
1. Async checkpointing (PyTorch DCP async save, Megatron --async-save) so training continues while the checkpoint is written.
2. Sharded checkpoints (each rank writes its shard, FSDP / ZeRO-3 style) instead of gathering to rank 0.
3. Storage throughput during checkpoints against what the volume should deliver, and the checkpoint interval against sqrt(2 x MTBF x checkpoint cost).
"""
from __future__ import annotations

from ..model import Alert, Family, Record, expr
from ..contract import L, M, R
from ..promql import Ctx
from ..config import seconds

NAME = "checkpoints"
REQUIRES = ("ranks",)  # reads job:train_ranks_progressing:count


def build(c: Ctx) -> Family:
    # the rates over the step histogram's window (a preset's cadence stretches it): the
    # overhead and the throughput are ratios of them
    window, rate = c.w("checkpoint_overhead"), c.stepped(c.w("rate"))
    max_age = c.cfg["thresholds"]["checkpoint_max_age"]
    job = c.tl(L.job_id)
    rules = (
        Record(c.rname(R.checkpoint_last), expr(f"""
            max {c.by(L.job_id)} ({c.m(M.train_checkpoint_timestamp_seconds)})
        """)),
        # Per job over the rate window first, then the long window over those few series:
        # a rate over an hour of every rank's raw counters read 120 samples per rank at
        # every evaluation (4 million at 16,384 ranks), the hour of a job-level record 120.
        Record(c.rname(R.checkpoint_seconds_rate), expr(f"""
            max {c.by(L.job_id)} (
              sum {c.by(L.job_id, L.rank)} ({c.rate(M.train_checkpoint_seconds_total, '', rate)})
            )
        """)),
        # for the recovery dashboard (checkpoints per hour, seconds per checkpoint), which
        # read an hour of every rank's counters at every step of a range
        Record(c.rname(R.checkpoint_rate), expr(f"""
            max {c.by(L.job_id)} (
              sum {c.by(L.job_id, L.rank)} ({c.rate(M.train_checkpoint_total, '', rate)})
            )
        """)),
        Record(c.rname(R.train_seconds_rate), expr(f"""
            max {c.by(L.job_id)} (
              sum {c.by(L.job_id, L.rank)} ({c.rate(M.train_step_seconds, '_sum', rate)})
            )
        """)),
        # read by the recovery family's throughput, with the seconds above
        Record(c.rname(R.checkpoint_bytes_rate), expr(f"""
            sum {c.by(L.job_id)} ({c.rate(M.checkpoint_bytes_written_total, '', rate)})
        """)),
        Record(c.rname(R.checkpoint_overhead), expr(f"""
            sum_over_time({c.r(R.checkpoint_seconds_rate)}[{window}])
            /
            (sum_over_time({c.r(R.train_seconds_rate)}[{window}]) > 0)
        """)),
        Alert(
            name="Train_NoCheckpoints",
            expr=expr(f"""
                time() - {c.r(R.checkpoint_last)} > {seconds(max_age):g}
                and {c.on(L.job_id)}
                {c.r(R.ranks_progressing)} > 0
            """),
            for_="2m",
            severity="warning",
            role="platform",
            summary=f"No checkpoint in job {job} for {max_age}",
            description=(
                f"Job {job} is still training but its last checkpoint completed "
                "{{ $value | humanizeDuration }} ago (limit "
                f"{max_age}). A failure now loses all the work since then."),
        ),
        Alert(
            name="Train_CheckpointOverhead",
            expr=expr(f"""
                100 * ({c.r(R.checkpoint_overhead)} > {c.t('checkpoint_overhead_ratio')})
            """),
            for_="15m",
            severity="warning",
            role="platform",
            summary=f"Checkpoints cost too much training time in job {job}",
            description=(
                f"Job {job} spent "
                '{{ printf "%.0f" $value }}% of its training time writing checkpoints over '
                f"the last {window} (limit "
                f"{c.cfg['thresholds']['checkpoint_overhead_ratio'] * 100:g}%). Consider async "
                "or sharded checkpoints, or a longer interval."),
        ),
    )
    return Family(NAME, __doc__, rules, requires=REQUIRES)

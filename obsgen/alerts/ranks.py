"""Ranks: is every rank of the job making progress?

A rank makes progress when its step counter (``train_step_seconds_count``) grew within
the progress window. The job's expected rank count is its world size, *remembered* for
the memory window: when every rank is gone, their series vanish, and a rule that counts
live ranks (as the reference document's does) has nothing left to compare and goes
silent exactly when the job is dead. Here the remembered world size keeps the job's
labels ("expected unless observed"), and the progressing count falls back to 0.

The rule fires only for jobs that trained at some point in the memory window (a job
still initialising has made no progress yet and is not failed), and never for a job
whose last step reached its planned steps (it finished and exited). It also catches a
job whose ranks are all present but hung, e.g. in a collective, since they make no
progress.

How long it waits depends on what is left of the job. While a process that has stepped
is still scraped (a hang, or ranks lost while the others wait in their next collective),
the fault is certain and the wait is the progress window and the ``for``. When no such
process is left (every process gone, or new ones after a restart that have not stepped
yet: rescheduling, NCCL init, a checkpoint load), the job may be restarting, which is
routine and not a page. It fails only once no full progress has been seen for
``windows.restart_gap``: a restart whose processes step again within it pages nothing, and
one that never comes back, or whose new processes hang before their first step, pages
then. A process's step count starts from zero, so "has stepped" is a count above zero;
a store that keeps a dead process's last sample without a staleness marker for its
lookback pages a whole-job restart on the short wait.

Elastic jobs that shrink on purpose keep the larger world size in memory for the memory
window and should raise ``windows.memory`` awareness in their runbook.

In Alertmanager (``alertmanager/obsgen-routes.yaml``) a firing Train_RankFailed inhibits
the straggler and checkpoint alerts of the same job: with ranks dead or hung, a slow or
silent rank and a missed checkpoint are consequences, not separate news.

## Train_RankFailed

Fewer ranks made progress in the progress window than the job's world size: ranks
died, hung, or their metrics are no longer scraped. A synchronous job cannot continue
without every rank; the remaining ranks wait in their next collective until the NCCL
timeout kills them.

Fires after the fault, with the default windows: 4 to 4.5 min; all gone (or new processes
that never step): about 20 min.

Check first:
1. The scheduler's view of the job's pods or Slurm tasks: OOM kills, evictions, node failures (NotReady nodes, Xid errors, ECC errors on the hosts of the missing ranks).
2. If every rank is present but none progresses, a hang: NCCL timeouts in the logs, a rank stuck in data loading or a deadlocked collective (py-spy dump of one rank shows where).
3. Whether the job restarts by itself (torchrun elastic, Slurm requeue) and from which checkpoint; if it does not, drain the failed node and resubmit.
"""
from __future__ import annotations

from ..config import duration, seconds
from ..model import Alert, Family, Record, expr
from ..contract import L, M, R
from ..promql import Ctx
from . import checkpoints, stragglers

NAME = "ranks"


def build(c: Ctx) -> Family:
    memory, progress, rate = c.w("memory"), c.w("progress"), c.w("rate")
    gap = c.w("restart_gap")
    # remembered for the memory window after the ranks are seen to stop (a preset's cadence),
    # and at least the progress window and twice the gap: a job without a live process
    # waits the gap, then the alert's for and its evaluations
    memory = c.outlasting(memory)
    memory = duration(max(seconds(memory), seconds(c.stepped(progress)) + 2 * seconds(gap)))
    world = f"max_over_time({c.r(R.world_size)}[{memory}])"
    job = c.tl(L.job_id)
    rules = (
        # Counted from the raw counts: nothing reads the steps of each rank, and a record
        # of them was every rank written and read again every evaluation. A 0 once no
        # rank progresses (for the memory window), not no value: a store that loses a
        # recorded series' staleness marker would return the last count for its lookback.
        Record(c.rname(R.ranks_progressing), expr(f"""
            count {c.by(L.job_id)} (
              sum {c.by(L.job_id, L.rank)} ({c.rate(M.train_step_seconds, '_count', progress, fn='increase')})
              > 0
            )
            or {c.on(L.job_id)} 0 * {world}
        """)),
        # Ranks whose running process has stepped: its step count is above zero. A process
        # that died leaves none (its series end with staleness markers); a new one after a
        # restart starts from zero and counts once it steps. A 0, not no value, once none
        # has: a ruler on remote storage reads an ended record's last value for the lookback.
        Record(c.rname(R.ranks_stepped), expr(f"""
            count {c.by(L.job_id)} (
              sum {c.by(L.job_id, L.rank)} ({c.m(M.train_step_seconds, '_count')}) > 0
            )
            or {c.on(L.job_id)} 0 * {world}
        """)),
        Record(c.rname(R.world_size), expr(f"""
            max {c.by(L.job_id)} ({c.m(M.train_world_size)})
        """), fact=True),
        Record(c.rname(R.current_step), expr(f"""
            max {c.by(L.job_id)} ({c.m(M.train_current_step)})
        """)),
        Record(c.rname(R.planned_steps), expr(f"""
            max {c.by(L.job_id)} ({c.m(M.train_planned_steps)})
        """), fact=True),
        Record(c.rname(R.step_mean), expr(f"""
            sum {c.by(L.job_id)} ({c.rate(M.train_step_seconds, '_sum', rate)})
            /
            (sum {c.by(L.job_id)} ({c.rate(M.train_step_seconds, '_count', rate)}) > 0)
        """)),
        Alert(
            name="Train_RankFailed",
            expr=expr(f"""
                (
                  {world}
                  - {c.on(L.job_id)}
                  ({c.r(R.ranks_progressing)} or 0 * {world})
                ) > 0
                and {c.on(L.job_id)}
                max_over_time({c.r(R.ranks_progressing)}[{memory}]) > 0
                and {c.on(L.job_id)}
                (
                  {c.r(R.ranks_stepped)} > 0
                  or
                  max_over_time({c.r(R.ranks_progressing)}[{gap}])
                  < {c.on(L.job_id)} {world}
                )
                unless {c.on(L.job_id)}
                (
                  max_over_time({c.r(R.current_step)}[{memory}])
                  >= {c.on(L.job_id)}
                  max_over_time({c.r(R.planned_steps)}[{memory}])
                )
            """),
            for_="2m30s",
            for_within=("memory", 0.5),
            severity="critical",
            role="platform",
            inhibits=(stragglers.NAME, checkpoints.NAME),
            summary=f"Ranks of job {job} stopped making progress",
            description=(
                f"{{{{ $value }}}} of the ranks of job {job} completed no step in the last "
                f"{c.stepped(progress)} (world size from {c.mname(M.train_world_size)}): they died, hung, "
                "or are no longer scraped. The job cannot continue without them."),
        ),
    )
    return Family(NAME, __doc__, rules, liveness=True)

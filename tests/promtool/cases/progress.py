"""Progress cases: 4 ranks on one host, a healthy step of about 1.55 s, slower warm-up
steps after every (re)start; the deadline gauge as obsgen.instrument serves it from the
launch config (train_planned_end_timestamp_seconds)."""
from obsgen.contract import L, M
from obsgen.synth import Job, Restart, SlowRank
from obsgen.synth_hw import Fleet

from ..support import At, Case, Fired, Never
from ._hw import MIN, scrapes, series, step_baseline, step_mean

# Both alerts read the ranks family's records, evaluated in another group: the fixtures
# evaluate this family's group first (tests/promtool/build.py), so they are one
# evaluation old, the most a live ruler shows.
LAG = 30

SR, ETA = "Train_StepTime_Regression", "Train_ETA_Slip"
JOB, OTHER = "llm-pretrain-a", "llm-pretrain-b"


def fleet(*jobs: Job, **deadlines: float) -> Fleet:
    return Fleet(list(jobs), dcgm=False, node_exporter=False,
                 deadlines={k.replace("_", "-"): v for k, v in deadlines.items()})


def regression(f: Fleet, minute: float) -> Fired:
    scr = scrapes(f, minute)
    t = minute * MIN - LAG
    return Fired({L.job_id.key: JOB}, step_mean(scr, t, JOB) / step_baseline(scr, t, JOB))


def slip(f: Fleet, minute: float, job_id: str) -> Fired:
    scr = scrapes(f, minute)
    t = minute * MIN
    read = t - LAG  # the ETA reads the ranks family's records, one evaluation behind here
    current = max(v for _, v in series(scr, read, M.train_current_step.key, **{L.job_id.key: job_id}))
    planned = max(v for _, v in series(scr, read, M.train_planned_steps.key, **{L.job_id.key: job_id}))
    remaining = (planned - current) * step_mean(scr, read, job_id)
    return Fired({L.job_id.key: job_id}, t + remaining - f.deadlines[job_id])


def job(**kw) -> Job:
    return Job(job_id=JOB, ranks=4, **kw)


slower = fleet(job(faults=(SlowRank(rank=3, factor=1.4, start=60 * MIN),)))
late = fleet(job(planned_steps=20_000), Job(job_id=OTHER, ranks=4, planned_steps=20_000, seed=3),
             llm_pretrain_a=4 * 3600, llm_pretrain_b=24 * 3600)

CASES = {
    "a healthy job with warm-up and a deadline it meets fires nothing": Case(
        [fleet(job(planned_steps=20_000), llm_pretrain_a=24 * 3600)], 70, [Never(SR), Never(ETA)]),
    "steps 30% slower from minute 60 fire StepTime_Regression within 40 minutes": Case(
        [slower], 105,
        [Never(SR, end=88), At(100, SR, (regression(slower, 100),)),
         At(105, SR, (regression(slower, 105),))]),
    "a restart followed by 40 minutes of slow warm-up fires nothing": Case(
        [fleet(job(warmup=40 * MIN, faults=(Restart(at=120 * MIN, gap=3 * MIN),)),
               llm_pretrain_a=30 * 24 * 3600)], 170, [Never(SR), Never(ETA)]),
    "a job projected past its deadline fires ETA_Slip after the quiet start; one on time "
    "does not": Case(
        [late], 70, [Never(ETA, end=59), At(62, ETA, (slip(late, 62, JOB),)),
                     At(70, ETA, (slip(late, 70, JOB),)), Never(SR)]),
}

"""Progress scenarios, sized from ``step_regression_ratio``, ``windows.restart_quiet``,
``windows.step_baseline`` and the alerts' ``for``: 4 ranks on one host, a step of about
1.55 s, 80% of it compute.

One rank's compute slowed until the synchronous step is twice as far above its baseline
as the ratio fires StepTime_Regression within the rate window, its ``for`` and two
evaluations, once the job is past its quiet start; a job projected past its deadline
fires ETA_Slip within the quiet start, its ``for`` and two evaluations."""
from __future__ import annotations

from ..synth import Job, Restart, SlowRank
from ..synth_hw import Fleet
from .model import Fires, NotStated, Quiet, Scenario, Setting, words

SR, ETA = "Train_StepTime_Regression", "Train_ETA_Slip"
JOB, OTHER = "scenario-progress-a", "scenario-progress-b"
MIN = 60.0


def fleet(*jobs: Job, **deadlines: float) -> Fleet:
    return Fleet(list(jobs), dcgm=False, node_exporter=False, deadlines=deadlines)


def scenarios(s: Setting) -> list:
    every = s.every("progress") + s.every("ranks")  # it reads the ranks family's records
    quiet_start = s.w("restart_quiet")
    quiet = [Quiet(a) for a in (SR, ETA) if s.has(a)]
    out: list = [Scenario(
        "a healthy job with warm-up and a deadline it meets fires no progress alert",
        [fleet(Job(job_id=JOB, ranks=4, planned_steps=20_000), **{JOB: 24 * 3600})],
        quiet_start + 40, quiet)]
    if s.has(SR):
        r = s.t("step_regression_ratio")
        factor = round((0.8 + 2 * (r - 1)) / 0.8, 3)
        w = s.read("rate") + s.for_(SR) + 2 * every + 1
        onset = max(60.0, quiet_start + 10, w + 10)
        if factor > 3 or onset + w > min(s.w("step_baseline"), 8 * 60):
            read = (f", the step histogram read over {words(s.read('rate'))} (a preset's "
                    "cadence)," if s.read("rate") != s.w("rate") else "")
            out.append(NotStated(f"slower steps fire {SR}", f"step_regression_ratio {r:g} or its "
                                 f"for ({words(s.for_(SR))}){read} against windows.step_baseline "
                                 f"({words(s.w('step_baseline'))}): a slowdown past it is not a "
                                 "regression the scenario can hold in its baseline"))
        else:
            out.append(Scenario(
                f"steps {2 * (r - 1):.0%} slower fire {SR} within the rate window, its for and "
                f"two evaluations ({words(w)})",
                [fleet(Job(job_id=JOB, ranks=4, faults=(SlowRank(rank=3, factor=factor,
                                                                 start=onset * MIN),)))],
                onset + w + 1, [Fires(SR, onset, w, ({"job_id": JOB},), words(w))]))
        # warm-up outlasts the quiet start by a third of the for (as long as the first run's,
        # which stays under half of the baseline's history)
        warm = quiet_start + min(10.0, s.for_(SR) / 3)
        restart = max(120.0, 2 * warm + 40)
        out.append(Scenario(
            f"a restart followed by {words(warm)} of slow warm-up (past the quiet start) fires "
            f"no {SR}",
            [fleet(Job(job_id=JOB, ranks=4, warmup=warm * MIN,
                       faults=(Restart(at=restart * MIN, gap=3 * MIN),)), **{JOB: 30 * 24 * 3600})],
            restart + 3 + warm + 20, [Quiet(a) for a in (SR, ETA) if s.has(a)]))
    if s.has(ETA):
        w = quiet_start + s.for_(ETA) + 2 * every + 1
        out.append(Scenario(
            f"a job projected hours past its deadline fires {ETA} within the quiet start, its "
            f"for and two evaluations ({words(w)}); one on time does not",
            [fleet(Job(job_id=JOB, ranks=4, planned_steps=20_000),
                   Job(job_id=OTHER, ranks=4, planned_steps=20_000, seed=3),
                   **{JOB: 4 * 3600, OTHER: 24 * 3600})],
            w + 2, [Fires(ETA, 0, w, ({"job_id": JOB},), words(w))]))
    return out

"""Pipeline scenarios, sized from ``bubble_excess_factor`` and Bubble_Excess's ``for``:
8 ranks in p=4 stages of 2, m=16 microbatches, so the theoretical 1F1B bubble is 3/19.
One stage's bubble at twice the factor's limit (capped at 90%) fires for that stage
within the rate window, its ``for`` and two evaluations."""
from __future__ import annotations

from ..synth import Job, Restart, StageBubble
from .model import Fires, NotStated, Quiet, Scenario, Setting, words

B = "Train_Bubble_Excess"
JOB = "scenario-pipeline"
MIN = 60.0
THEORY = 3 / 19


def pp(**kw) -> Job:
    return Job(**{"job_id": JOB, "pp": 4, "microbatches": 16, **kw})


def scenarios(s: Setting) -> list:
    if not s.has(B):
        return []
    limit = s.t("bubble_excess_factor") * THEORY
    w = s.read("rate") + s.for_(B) + 2 * s.every("pipeline")
    out: list = [
        Scenario("a healthy pipeline job (p=4, m=16) at the theoretical bubble fires nothing",
                 [pp()], 10 + w + 5, [Quiet(B)]),
        Scenario("a job without pipeline parallelism (p=1) never fires, whatever its idle time",
                 [Job(job_id=JOB, pp=1, microbatches=8, emit_pipeline=True)], 10 + w + 5, [Quiet(B)]),
        Scenario("a restart with a 3-minute gap, counter resets and new instances fires no "
                 "bubble alert", [pp(faults=(Restart(at=20 * MIN, gap=3 * MIN),))], 23 + w + 5,
                 [Quiet(B)])]
    bubble = round(min(0.9, (limit + 1) / 2 if 2 * limit >= 0.9 else 2 * limit), 3)
    if bubble <= limit * 1.1:
        return out + [NotStated(f"an excess bubble fires {B}", f"bubble_excess_factor "
                                f"{s.t('bubble_excess_factor'):g}: its limit "
                                f"({limit:.0%} idle) leaves no excess bubble to model")]
    onset = 10.0
    return out + [Scenario(
        f"one stage's bubble at {bubble:.0%} (p=4, m=16) fires {B} for that stage only, within "
        f"the rate window, its for and two evaluations ({words(w)})",
        [pp(faults=(StageBubble(stage=2, bubble=bubble, start=onset * MIN),))], onset + w + 2,
        [Fires(B, onset, w, ({"job_id": JOB, "stage": "2"},), words(w))])]

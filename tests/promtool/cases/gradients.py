"""Gradient cases: 8 ranks, the gradient norm and loss reported by the last rank only
(as Megatron does), gradient-norm noise of 10%, a large early norm during warm-up."""
import math

from obsgen.synth import GradNaN, GradSpike, GradVanish, Job, Restart

from ..support import At, Case, Fired, Never, sample

EXPL, NONF, VAN = "Train_GradientExplosion", "Train_GradientNonFinite", "Train_GradientVanishing"
JOB = "llm-pretrain-a"
MIN = 60
ALL = (EXPL, NONF, VAN)


def quiet(*alerts, **kw):
    return [Never(a, **kw) for a in alerts]


def norm(job: Job, minute: float) -> Fired:
    return Fired({"job_id": job.job_id}, sample(job, "train_grad_norm", minute))


spike = Job(job_id=JOB, faults=(GradSpike(factor=40, start=45 * MIN, duration=2 * MIN),))
nan_then_spike = Job(job_id=JOB, faults=(GradNaN(start=20 * MIN, duration=3 * MIN),
                                         GradSpike(factor=40, start=45 * MIN, duration=2 * MIN)))
vanish = Job(job_id=JOB, faults=(GradVanish(start=60 * MIN, value=1e-5),))

CASES = {
    "a healthy job with warm-up (a 10x gradient norm at start) fires nothing": Case(
        [Job(job_id=JOB)], 90, quiet(*ALL)),
    "a NaN gradient norm fires NonFinite within 3 minutes and no explosion": Case(
        [Job(job_id=JOB, faults=(GradNaN(start=40 * MIN),))], 60,
        [Never(NONF, end=40), At(42, NONF, (Fired({"job_id": JOB, "signal": "grad_norm"}, 1),)),
         At(55, NONF, (Fired({"job_id": JOB, "signal": "grad_norm"}, 1),)), *quiet(EXPL, VAN)]),
    "a NaN loss with a finite gradient norm fires NonFinite for the loss": Case(
        [Job(job_id=JOB, faults=(GradNaN(start=40 * MIN, grad=False, loss=True),))], 50,
        [Never(NONF, end=40), At(43, NONF, (Fired({"job_id": JOB, "signal": "loss"}, 1),)),
         *quiet(EXPL, VAN)]),
    "an Inf gradient norm for 3 minutes fires NonFinite": Case(
        [Job(job_id=JOB, faults=(GradNaN(start=40 * MIN, duration=3 * MIN, value=math.inf),))], 50,
        [At(42, NONF, (Fired({"job_id": JOB, "signal": "grad_norm"}, 1),)),
         Never(NONF, start=44), *quiet(EXPL, VAN)]),
    "a single Inf step (an fp16 overflow the loss scaler skips) fires nothing": Case(
        [Job(job_id=JOB, faults=(GradNaN(start=40 * MIN, duration=30, value=math.inf),))], 50,
        quiet(*ALL)),
    "a 2-minute spike to 40x fires Explosion within 3 minutes, then resolves": Case(
        [spike], 60,
        [Never(EXPL, end=45.5), At(46, EXPL, (norm(spike, 46),)), At(46.5, EXPL, (norm(spike, 46.5),)),
         Never(EXPL, start=47.5), *quiet(NONF, VAN)]),
    "a NaN episode does not poison the baseline: a later 40x spike still fires": Case(
        [nan_then_spike], 60,
        [At(22, NONF, (Fired({"job_id": JOB, "signal": "grad_norm"}, 1),)),
         At(46.5, EXPL, (norm(nan_then_spike, 46.5),)), Never(EXPL, end=45.5), Never(VAN)]),
    "a gradient norm collapsing to 1e-5 fires Vanishing after 30 minutes": Case(
        [vanish], 100,
        [Never(VAN, end=89), At(92, VAN, (norm(vanish, 92),)), *quiet(EXPL, NONF)]),
    "a restart with a 3-minute gap, counter resets and new instances fires no gradient alert": Case(
        [Job(job_id=JOB, faults=(Restart(at=40 * MIN, gap=3 * MIN),))], 80, quiet(*ALL)),
}

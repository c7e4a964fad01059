"""Gradient scenarios, sized from ``grad_explosion_factor``, ``grad_vanishing_fraction``,
``windows.grad_baseline`` / ``grad_long_baseline`` and the alerts' ``for``.

The norm and loss come from the last rank only, as Megatron reports them, with 10% noise
and a 10x norm during warm-up. A spike is four times the explosion factor; a vanishing
norm a hundredth of the vanishing fraction. NonFinite and Explosion fire within their
``for`` and two evaluations of the onset, and so does Vanishing (while the low norm is
less than half of its long baseline's window).
"""
from __future__ import annotations

from .. import contract
from ..synth import GradNaN, GradSpike, GradVanish, Job, RankLoss, Restart
from .model import Fires, NotStated, Quiet, Scenario, Setting, words

EXPL, NONF, VAN = "Train_GradientExplosion", "Train_GradientNonFinite", "Train_GradientVanishing"
JOB = "scenario-gradients"
MIN = 60.0
STEP = Job.step_seconds  # the scenario job's healthy step, in seconds


def scenarios(s: Setting) -> list:
    every = s.every("gradients")
    base = s.w("grad_baseline")
    quiet = [Quiet(a) for a in (EXPL, NONF, VAN) if s.has(a)]
    onset = max(10.0, base / 2 + 5)  # the warm-up's 10x norm well inside the baseline
    out: list = [
        Scenario("a healthy job (10% noise in the gradient norm, a 10x norm in warm-up) "
                 "fires no gradient alert", [Job(job_id=JOB)], onset + 30, quiet),
        Scenario("a restart with a 3-minute gap and new instances fires no gradient alert",
                 [Job(job_id=JOB, faults=(Restart(at=onset * MIN, gap=3 * MIN),))],
                 onset + 30, quiet)]
    w = s.for_(NONF) + 2 * every
    out.append(Scenario(
        f"a NaN gradient norm fires {NONF} within its for and two evaluations ({words(w)})",
        [Job(job_id=JOB, faults=(GradNaN(start=onset * MIN),))], onset + w + 3,
        [Fires(NONF, onset, w, ({"job_id": JOB, "signal": "grad_norm"},), words(w)),
         *[Quiet(a) for a in (EXPL,) if s.has(a)]]))
    # A store that drops NaN samples (VictoriaMetrics): the instrument's train_nonfinite
    # still says it; a source with the raw gauges only is seen by the norm's absence.
    out.append(Scenario(
        f"on a store that drops NaN samples, a NaN gradient norm from obsgen.instrument fires "
        f"{NONF} from train_nonfinite within its for and two evaluations ({words(w)})",
        [Job(job_id=JOB, drops_nan=True, faults=(GradNaN(start=onset * MIN),))], onset + w + 3,
        [Fires(NONF, onset, w, ({"job_id": JOB, "signal": "grad_norm"},), words(w)),
         *[Quiet(a) for a in (EXPL,) if s.has(a)]]))
    w = s.read("progress") + s.for_(NONF) + 2 * every + 2 * s.every("ranks")
    out.append(Scenario(
        f"on a store that drops NaN samples, a NaN gradient norm from a source without "
        f"train_nonfinite (Megatron) fires {NONF} once the job steps through the progress "
        f"window with no finite norm: within it, the for and two evaluations of both "
        f"families ({words(w)})",
        [Job(job_id=JOB, drops_nan=True, nonfinite_gauge=False,
             faults=(GradNaN(start=onset * MIN),))], onset + w + 3,
        [Fires(NONF, onset, w, ({"job_id": JOB, "signal": "grad_norm"},), words(w)),
         *[Quiet(a) for a in (EXPL,) if s.has(a)]]))
    out += _sdk_drops_nan(s, onset, every)
    for hang, what in ((True, "the others hang"), (False, "the others keep training")):
        out.append(Scenario(
            f"on a store that drops NaN samples, the rank that reports the norm vanishing while "
            f"{what} fires no {NONF} (Train_RankFailed's)",
            [Job(job_id=JOB, drops_nan=True, nonfinite_gauge=False,
                 faults=(RankLoss(ranks=(7,), at=onset * MIN, hang=hang),))], onset + w + 3,
            [Quiet(NONF)] if s.has(NONF) else []))
    factor = 4 * s.t("grad_explosion_factor")
    w = s.for_(EXPL) + 2 * every
    hold = w + 1
    if factor > 1000:
        out.append(NotStated(f"a gradient spike fires {EXPL}", f"grad_explosion_factor "
                             f"{s.t('grad_explosion_factor'):g}: no gradient spike is sized to it"))
    else:
        out.append(Scenario(
            f"a gradient norm spiking to {factor:g}x for {words(hold)} fires {EXPL} within its "
            f"for and two evaluations ({words(w)})",
            [Job(job_id=JOB, faults=(GradSpike(factor=factor, start=onset * MIN,
                                               duration=hold * MIN),))],
            onset + w + 1, [Fires(EXPL, onset, w, ({"job_id": JOB},), words(w)),
                            *[Quiet(a) for a in (NONF,) if s.has(a)]]))
        nan_end = onset + 3
        later = nan_end + 10
        out.append(Scenario(
            f"a NaN episode does not poison the baseline: a later {factor:g}x spike still fires "
            f"{EXPL} within {words(w)}",
            [Job(job_id=JOB, faults=(GradNaN(start=onset * MIN, duration=3 * MIN),
                                     GradSpike(factor=factor, start=later * MIN,
                                               duration=hold * MIN)))],
            later + w + 1, [Fires(EXPL, later, w, ({"job_id": JOB},), words(w))]))
    long = s.w("grad_long_baseline")
    # the low norm is below the fraction of the long median until it is half the window
    w = s.for_(VAN) + 2 * every
    if w >= long / 2:
        out.append(NotStated(f"a vanishing gradient norm fires {VAN}",
                             f"its for ({words(s.for_(VAN))}) and two evaluations reach half "
                             f"of windows.grad_long_baseline ({words(long)}): the low norm is "
                             "its own baseline before the alert can fire"))
    else:
        value = s.t("grad_vanishing_fraction") / 100
        out.append(Scenario(
            f"a gradient norm collapsing to {value:g} fires {VAN} within its for and two "
            f"evaluations ({words(w)})",
            [Job(job_id=JOB, faults=(GradVanish(start=onset * MIN, value=value),))], onset + w + 2,
            [Fires(VAN, onset, w, ({"job_id": JOB},), words(w)),
             *[Quiet(a) for a in (EXPL, NONF) if s.has(a)]]))
    return out


def _sdk_drops_nan(s: Setting, onset: float, every: float) -> list:
    """A source that logs its signals with its steps (a preset's cadence, Megatron through
    the OpenTelemetry SDK): the SDK drops a NaN and serves the last finite value again,
    which the rules read as a signal frozen for windows.frozen_signal while the step
    histogram took thresholds.frozen_observations observations."""
    if not s.has(NONF) or not s.cfg.per_log_interval(contract.M.train_step_seconds.key):
        return []
    sentence = (f"a NaN gradient norm the OpenTelemetry SDK drops (it serves the last finite "
                f"value again) fires {NONF}")
    logged = s.cfg.steps_per_observation(contract.M.train_step_seconds.key) * STEP / MIN
    frozen = s.w("frozen_signal")
    if logged * (s.t("frozen_observations") + 1) > frozen:
        return [NotStated(sentence, f"a log interval of the scenario's job ({words(logged)}) "
                          f"takes fewer than thresholds.frozen_observations "
                          f"({s.t('frozen_observations')}) and one more within "
                          f"windows.frozen_signal ({words(frozen)}): not judged")]
    w = frozen + s.for_(NONF) + 2 * every
    return [Scenario(
        f"{sentence} within windows.frozen_signal, its for and two evaluations ({words(w)})",
        [Job(job_id=JOB, nonfinite_gauge=False, sdk_drops_nan=True,
             faults=(GradNaN(start=onset * MIN),))], onset + w + 3,
        [Fires(NONF, onset, w, ({"job_id": JOB, "signal": "grad_norm"},), words(w)),
         *[Quiet(a) for a in (EXPL,) if s.has(a)]])]

"""Gradients: the gradient norm and the loss as correctness signals.

``train_grad_norm`` is the global norm after the gradient collective, so every rank that
reports it reports the same value (often only one rank reports it); rules take the
job's maximum. NaN and Inf are handled before anything else reads the norm: a single
NaN sample turns ``avg_over_time`` into NaN and every comparison with NaN is false, which
is how the reference document's explosion rule goes silent on exactly the failure it
exists for. The finite norm is recorded separately (``(x >= 0) < +Inf`` drops NaN, +Inf
and -Inf) and the baselines are medians of the finite norm, which neither NaN nor an
earlier spike or warm-up can drag.

## Train_GradientExplosion

The finite gradient norm is more than the explosion factor times its median over the
baseline window. The next steps' loss is likely to diverge; catching it early is the
difference between rolling back a few minutes and losing the run.

Fires after the fault, with the default windows: 1 min.

Check first:
1. The loss curve and the learning-rate schedule around the spike: a warm-up that ends too steeply or a learning rate too high for the batch size.
2. The data of the steps before the spike: a corrupt or extreme batch, a new data shard, sequence-length outliers.
3. Whether the run recovers by itself within a few hundred steps; if not, roll back to the last checkpoint before the spike and skip the offending data or lower the learning rate.

## Train_GradientNonFinite

The gradient norm or the loss is NaN or Inf for a minute or more. With bf16 training a
non-finite value is fatal to the run; with fp16 and dynamic loss scaling isolated Inf
steps are skipped by design, which is why a single sample does not fire.

A source that records the norm and the loss once per log interval, together with its
step histogram (the megatron-otel preset), never exports the NaN: the OpenTelemetry SDK
drops a non-finite gauge value and exports the last finite one again. There the alert
also fires when the signal has not changed on any of the job's series within
``windows.frozen_signal`` while the step histogram took
``thresholds.frozen_observations`` observations or more: a healthy norm and loss change
at every log. A job that stopped stepping is Train_RankFailed's; a log interval longer
than a third of the window is not judged.

Fires after the fault, with the default windows: 1 min (a signal frozen on the
OpenTelemetry path: 16 min).

Check first:
1. Which signal went non-finite first (the signal label) and at which step; the last finite loss and gradient norm before it.
2. Numerics: loss-scale collapse in fp16, overflow in attention softmax or layer norm, division by zero in a custom loss, optimizer state restored from a bad checkpoint.
3. Stop the job rather than let it burn GPU hours, and restart from the last checkpoint with the offending data skipped or a lower learning rate.

## Train_GradientVanishing

The gradient norm has stayed below the vanishing fraction of its long-window median.
Training has stalled: the model is no longer learning.

Fires after the fault, with the default windows: 30 min.

Check first:
1. The learning-rate schedule: a decay that reached near zero too early, or a scheduler restored with the wrong step after a restart.
2. Frozen parameters or a broken backward path: a detached tensor, gradient clipping set far too low, a mask that zeroes the loss.
3. The loss curve: a flat loss together with a tiny gradient norm confirms the stall; a falling loss means the model converged and the alert can be silenced for this run.
"""
from __future__ import annotations

from ..model import Alert, Family, Record, expr
from ..contract import L, M, R
from ..promql import Ctx

NAME = "gradients"
REQUIRES = ("ranks",)  # reads job:train_ranks_progressing:count, job:train_world_size:max


def _nonfinite(c: Ctx, metric, signal: str) -> str:
    m = c.m(metric)
    return (f'label_replace(count {c.by(L.job_id)} (({m} != {m}) or ({m} == +Inf) '
            f'or ({m} == -Inf)), "{c.l(L.signal)}", "{signal}", "", "")')


def _flagged(c: Ctx) -> str:
    return f"count {c.by(L.job_id, L.signal)} ({c.m(M.train_nonfinite)} > 0)"


def _unseen(c: Ctx, metric, finite, signal: str) -> str:
    """Every rank progresses, the job had a finite value in the baseline window and no
    sample below +Inf in the progress window (a step histogram that records once per n
    steps: n progress windows): on a store that drops NaN samples, that is the NaN.
    min_over_time skips NaN samples (NaN only when all are), and it reads the samples'
    times: an instant read would return the last finite value for the lookback (5m)."""
    fresh = c.stepped(c.w("progress"))
    world = f"max_over_time({c.r(R.world_size)}[{c.w('memory')}])"
    had = c.outlasting(c.w("grad_baseline"))  # after the signal is seen gone
    return (f"label_replace({c.r(R.ranks_progressing)} > 0 "
            f"unless {c.on(L.job_id)} ({world} > {c.on(L.job_id)} {c.r(R.ranks_progressing)}) "
            f"and {c.on(L.job_id)} count_over_time({c.r(finite)}[{had}]) "
            f"unless {c.on(L.job_id)} max {c.by(L.job_id)} "
            f"(min_over_time({c.m(metric)}[{fresh}]) < +Inf), "
            f'"{c.l(L.signal)}", "{signal}", "", "")')


def _frozen(c: Ctx, metric, signal: str) -> str:
    """The signal of a source that records it once per log interval, with its step
    histogram (Megatron), unchanged on every series of the job within the window while the
    histogram took the threshold's observations or more: the OpenTelemetry SDK drops a NaN
    and exports the last finite value again. A job that stopped stepping, or logs less
    often than that, is not judged."""
    window = c.w("frozen_signal")
    return (f"label_replace(max {c.by(L.job_id)} (changes({c.m(metric)}[{window}])) == 0 "
            f"and {c.on(L.job_id)} max {c.by(L.job_id)} "
            f"(changes({c.m(M.train_step_seconds, '_count')}[{window}])) "
            f">= {c.t('frozen_observations')}, "
            f'"{c.l(L.signal)}", "{signal}", "", "")')


def build(c: Ctx) -> Family:
    base, long = c.w("grad_baseline"), c.w("grad_long_baseline")
    factor = c.t("grad_explosion_factor")
    job = c.tl(L.job_id)
    logged = c.cfg.per_log_interval(M.train_step_seconds.key)  # with its signals (Megatron)
    frozen = "".join(f"\n                or\n                {_frozen(c, m, name)}"
                     for m, name in ((M.train_grad_norm, "grad_norm"), (M.train_loss, "loss"))
                     if logged)
    rules = (
        Record(c.rname(R.grad_norm_finite), expr(f"""
            max {c.by(L.job_id)} (({c.m(M.train_grad_norm)} >= 0) < +Inf)
        """)),
        Record(c.rname(R.loss_finite), expr(f"""
            max {c.by(L.job_id)} (({c.m(M.train_loss)} > -Inf) < +Inf)
        """)),
        Record(c.rname(R.grad_norm_baseline), expr(f"""
            quantile_over_time(0.5, {c.r(R.grad_norm_finite)}[{base}])
        """)),
        Record(c.rname(R.grad_norm_long_baseline), expr(f"""
            quantile_over_time(0.5, {c.r(R.grad_norm_finite)}[{long}])
        """)),
        Alert(
            name="Train_GradientExplosion",
            expr=expr(f"""
                {c.r(R.grad_norm_finite)}
                > {factor} * ({c.r(R.grad_norm_baseline)} > 0)
            """),
            for_="1m",
            for_within=("grad_baseline", 0.5),
            severity="critical",
            role="workload",
            summary=f"Gradient explosion in job {job}",
            description=(
                f"The gradient norm of job {job} is {{{{ $value | humanize }}}}, more than "
                f"{factor}x its median over the last {base}. The loss is likely to diverge."),
        ),
        Alert(
            name="Train_GradientNonFinite",
            expr=expr(f"""
                {_nonfinite(c, M.train_grad_norm, 'grad_norm')}
                or
                {_nonfinite(c, M.train_loss, 'loss')}
                or
                {_flagged(c)}
                or
                {_unseen(c, M.train_grad_norm, R.grad_norm_finite, 'grad_norm')}
                or
                {_unseen(c, M.train_loss, R.loss_finite, 'loss')}{frozen}
            """),
            for_="1m",
            severity="critical",
            role="workload",
            summary=f"NaN or Inf {c.tl(L.signal)} in job {job}",
            description=(
                f"The {c.tl(L.signal)} of job {job} is NaN or Inf (or, where the store "
                "drops NaN samples, has had no finite value while every rank kept "
                "stepping" + (f"; or, recorded once per log interval, has not changed "
                              f"in {c.w('frozen_signal')} of logged steps: the OpenTelemetry "
                              "SDK drops a NaN and exports the last finite value again"
                              if logged else "") + "). The run is no longer learning; stop "
                "it and restart from the last good checkpoint."),
        ),
        Alert(
            name="Train_GradientVanishing",
            expr=expr(f"""
                {c.r(R.grad_norm_finite)}
                < {c.t('grad_vanishing_fraction')} * ({c.r(R.grad_norm_long_baseline)} > 0)
            """),
            for_="30m",
            for_within=("grad_long_baseline", 0.5),
            severity="warning",
            role="workload",
            summary=f"Vanishing gradients in job {job}",
            description=(
                f"The gradient norm of job {job} is {{{{ $value | humanize }}}}, below "
                f"{c.cfg['thresholds']['grad_vanishing_fraction'] * 100:g}% of its median over "
                f"the last {long}. Training has stalled."),
        ),
    )
    return Family(NAME, __doc__, rules, requires=REQUIRES)

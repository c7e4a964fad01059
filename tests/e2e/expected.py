"""What the simulator scenarios must fire, and how a run is collected from Prometheus,
Alertmanager and the webhook (the session fixture ``run`` in conftest.py)."""
from __future__ import annotations

import json
import time

from obsgen.simulate.scenarios import SCENARIOS

from . import harness

MIN = 60
END = 95 * MIN  # model seconds: the slowest expected alert (vanishing) fires by ~92
P, T = "Train_Straggler_Persistent", "Train_Straggler_Transient"


def alert(name: str, **labels) -> tuple:
    return (name, tuple(sorted(labels.items())))


# sentence -> (scenario, the alerts Prometheus fires for its job at some point)
EXPECTED = {
    "a healthy job with warm-up, noise and checkpoints fires nothing": ("healthy", set()),
    "a healthy job with every parallelism (TP, PP, EP, CP, FSDP) fires nothing": (
        "megatron", set()),
    "a rank 20% slower in compute fires Persistent for that rank and stage only": (
        "straggler", {alert(P, rank="3", stage="0")}),
    # Each turn is shorter than a spell: no rank is paged, the cost of the moving straggler is
    "a slow rank rotating every 2 minutes fires Transient, never Persistent": (
        "rotating-straggler", {alert(T)}),
    # The stage that waits for the straggler's idles: Prometheus fires its bubble alert,
    # Alertmanager suppresses it while the straggler fires (test_scenarios.py).
    "a straggler in a pipeline fires Persistent for it and Bubble_Excess for the stage that "
    "waits": ("pipeline-straggler", {alert(P, rank="5", stage="1"),
                                     alert("Train_Bubble_Excess", stage="0")}),
    "a 40x gradient spike fires Explosion": ("grad-explosion", {alert("Train_GradientExplosion")}),
    "a NaN gradient norm fires NonFinite for the gradient norm, and no explosion": (
        "nan", {alert("Train_GradientNonFinite", signal="grad_norm")}),
    "a gradient norm collapsing to 1e-5 fires Vanishing": (
        "vanishing", {alert("Train_GradientVanishing")}),
    "a pipeline stage idling 45% fires Bubble_Excess for that stage only": (
        "bubble", {alert("Train_Bubble_Excess", stage="2")}),
    "a job that stops checkpointing fires NoCheckpoints": (
        "checkpoint-stall", {alert("Train_NoCheckpoints")}),
    "70 s checkpoints every 10 minutes fire CheckpointOverhead": (
        "checkpoint-overhead", {alert("Train_CheckpointOverhead")}),
    "two lost ranks with the others hung fire RankFailed, and no missed checkpoint": (
        "rank-loss", {alert("Train_RankFailed")}),
    "a lost rank and a straggler fire both in Prometheus": (
        "rank-loss-straggler", {alert("Train_RankFailed"), alert(P, rank="3", stage="0")}),
    "a job that completes its planned steps and exits fires nothing": ("completion", set()),
    "a restart with new processes and counters from zero fires nothing": ("restart", set()),
    "a restart 10 minutes after every process exited fires nothing": ("slow-restart", set()),
    "a job whose processes all exit and never come back fires RankFailed": (
        "crash", {alert("Train_RankFailed")}),
}
IDENTITY = ("rank", "stage", "signal")


def job_id(scenario: str) -> str:
    return f"sim-{scenario}"



def collect(stack, simulator) -> dict:
    """Wait until the model passed END and every expected alert fired, then take what
    Prometheus and Alertmanager say: fired {job_id: {alert}}, first firing model time of
    each, Alertmanager's alerts and the webhook's notifications."""
    wall0, speed = simulator["status"]["wall0"], stack.speed
    expected = {(job_id(s), a) for s, alerts in EXPECTED.values() for a in alerts}
    harness.wait_until("every scenario job scraped",
                       lambda: stack.prom.targets_up() >= 2 * len(SCENARIOS) - 2, 60)

    def fired():
        span = int(time.time() - wall0) + 5
        out = {}
        for s in stack.prom.query(f'max_over_time(ALERTS{{alertstate="firing"}}[{span}s])'):
            m = s["metric"]
            ident = alert(m["alertname"], **{k: m[k] for k in IDENTITY if k in m})
            out.setdefault(m.get("job_id", "?"), set()).add(ident)
        return out

    def done():
        model = (time.time() - wall0) * speed
        got = {(j, a) for j, alerts in fired().items() for a in alerts}
        return model >= END and expected <= got

    def why() -> str:  # a loaded machine shows as a stalled simulator or late rules
        try:
            status = json.loads(harness.get(f"{simulator['url']}/status"))
            gap = (f"{status['max_gap_seconds']:.1f} s (interval {status['interval']:g} s)")
        except OSError as exc:  # the simulator is gone: say so, not instead of the timeout
            gap = f"unknown ({exc})"
        return (f"fired so far: {fired()}\nthe simulator's longest wall gap between ticks: "
                f"{gap}; the machine's stalls since the start: "
                f"{harness.STALLS.within(wall0, time.time()):.1f} s")

    harness.wait_until("every expected alert", done, END / speed + 90, interval=2,
                       on_fail=why)
    span = int(time.time() - wall0) + 5
    first = {}
    for s in stack.prom.query(
            f'min_over_time(timestamp(ALERTS{{alertstate="firing"}})[{span}s:500ms])'):
        m = s["metric"]
        ident = alert(m["alertname"], **{k: m[k] for k in IDENTITY if k in m})
        first[(m.get("job_id"), ident)] = (float(s["value"][1]) - wall0) * speed
    time.sleep(3)  # let the last notifications through (group_wait is 0.5 s)
    return {"fired": fired(), "first": first, "am": stack.am_alerts(),
            "received": stack.webhook.received()}



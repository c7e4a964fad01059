"""The rendered inhibitions, proven on a real Alertmanager on loopback with amtool: a cause
suppresses its effects for the same job (and rank, where the rule says so), and nothing
else. Alerts are added with ``amtool alert add`` and read back with ``amtool alert query``
(active) and ``--inhibited`` (suppressed)."""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from obsgen import alertmanager

from .e2e.harness import free_port

ROOT = Path(__file__).resolve().parent.parent
P, LA = "Train_Straggler_Persistent", "Train_Straggler_LateArrival"
BUBBLE, STEP, ETA = "Train_Bubble_Excess", "Train_StepTime_Regression", "Train_ETA_Slip"

# sentence -> (alerts added: (name, labels), alerts expected suppressed: (name, job_id))
CASES = {
    "a persistent straggler suppresses its job's bubble, step-time and ETA alerts": (
        [(P, {"rank": "3"}), (BUBBLE, {"stage": "1"}), (STEP, {}), (ETA, {})],
        {BUBBLE, STEP, ETA}),
    "a TP-group straggler suppresses its job's bubble alert": (
        [("Train_Straggler_TPGroup", {"pp_group": "8"}), (BUBBLE, {"stage": "0"})], {BUBBLE}),
    "a mesh pattern suppresses its job's step-time regression": (
        [("Train_Straggler_Mapping", {"stage": "0", "mesh_axis": "tp", "mesh_position": "1"}),
         (STEP, {})], {STEP}),
    "a late arrival suppresses its job's ETA slip": (
        [(LA, {"rank": "5", "group": "tp"}), (ETA, {})], {ETA}),
    "a persistent straggler suppresses the late arrival of the same rank": (
        [(P, {"rank": "5"}), (LA, {"rank": "5", "group": "tp"})], {LA}),
    "a persistent straggler leaves another rank's late arrival": (
        [(P, {"rank": "5"}), (LA, {"rank": "6", "group": "tp"})], set()),
    "a transient straggler suppresses nothing: moving slowness is its own news": (
        [("Train_Straggler_Transient", {}), (BUBBLE, {"stage": "1"}), (STEP, {})], set()),
    "a failed rank suppresses its job's stragglers": (
        [("Train_RankFailed", {}), (P, {"rank": "2"})], {P}),
}


@pytest.fixture(scope="module")
def am(tmp_path_factory):
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if binary is None or shutil.which("amtool") is None:
        pytest.skip("prometheus-alertmanager not installed: make tools")
    port = free_port()
    data = tmp_path_factory.mktemp("alertmanager")
    proc = subprocess.Popen(
        [binary, f"--config.file={ROOT / alertmanager.PATH}", f"--storage.path={data}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"--alertmanager.url=http://127.0.0.1:{port}"
    for _ in range(100):
        if subprocess.run(["amtool", url, "alert", "query"], capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def amtool(url: str, *args: str) -> str:
    out = subprocess.run(["amtool", url, *args], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.amtool
@pytest.mark.parametrize("alerts,suppressed", list(CASES.values()), ids=list(CASES))
def test_alertmanager_suppresses_exactly_the_effects(am, alerts, suppressed):
    job = f"job-{abs(hash(repr(alerts))) % 10**8}"
    for name, labels in alerts:
        amtool(am, "alert", "add", name, f"job_id={job}",
               *[f"{k}={v}" for k, v in labels.items()])
    # the same alerts in another job are never suppressed by this job's causes
    other = f"{job}-other"
    for name, labels in alerts[1:]:
        amtool(am, "alert", "add", name, f"job_id={other}",
               *[f"{k}={v}" for k, v in labels.items()])

    def names(*flags: str) -> set[tuple[str, str]]:
        return {(a["labels"]["alertname"], a["labels"]["job_id"])
                for a in json.loads(amtool(am, "alert", "query", "-o", "json", *flags))}

    inhibited = names("--inhibited") - names()  # query -i lists active ones too
    assert {n for n, j in inhibited if j == job} == suppressed
    assert not {n for n, j in inhibited if j == other}
    assert {n for n, j in names() if j == job} == {n for n, _ in alerts} - suppressed

"""The pod label that holds the job id, read as kube-state-metrics publishes it: the key
sanitised, then snake-cased and lower-cased (kube-state-metrics internal/store/utils.go),
set once with ``pod_job_label`` and proved with promtool on a camelCase label."""
from __future__ import annotations

import copy

import pytest

from obsgen import config, promtool, registry
from obsgen.contract import L, ksm_pod_label
from obsgen.synth import Job
from obsgen.synth_hw import Fleet, SlowGPU

from .promtool.build import fixture_with
from .promtool.cases._hw import MIN
from .promtool.cases.gpus import JOB, TP, UNMAPPED, tp
from .promtool.support import At, Case, Never

NAMES = registry.alert_names()

# kube-state-metrics' own cases (TestKubeLabelsToPrometheusLabels) and the job labels of
# the common training operators.
KSM = {
    "a plain key is prefixed": ("app1", "label_app1"),
    "a leading digit is kept": ("0_app3", "label_0_app3"),
    "a character outside [a-zA-Z0-9_] becomes an underscore": ("$app4", "label__app4"),
    "camelCase becomes snake_case": ("camelCase", "label_camel_case"),
    "snake_case and camelCase mixed": ("snake_camelCase", "label_snake_camel_case"),
    "the Kubeflow training operator's job name": (
        "training.kubeflow.org/job-name", "label_training_kubeflow_org_job_name"),
    "a camelCase key under a prefix": (
        "training.kubeflow.org/jobName", "label_training_kubeflow_org_job_name"),
    "a run of capitals after a lower-case letter gets one underscore": ("jobID", "label_job_id"),
    "capitals at the start get none": ("HTTPServer", "label_httpserver"),
    "Volcano's job name": ("volcano.sh/job-name", "label_volcano_sh_job_name"),
}


@pytest.mark.parametrize("case", KSM, ids=list(KSM))
def test_pod_label_keys_become_kube_state_metrics_labels(case):
    key, published = KSM[case]
    assert ksm_pod_label(key) == published


def load(tmp_path, text: str) -> config.Config:
    (tmp_path / "obsgen.yaml").write_text(text)
    return config.load(tmp_path / "obsgen.yaml", alert_names=NAMES)


def test_the_rules_read_the_published_name(tmp_path):
    assert load(tmp_path, "pod_job_label: jobName\n").label(L.label_job_id.key) == "label_job_name"
    assert load(tmp_path, "{}\n").label(L.label_job_id.key) == "label_job_id"


def test_an_explicit_rename_wins(tmp_path):
    cfg = load(tmp_path, "pod_job_label: jobName\nlabels: {label_job_id: label_run}\n")
    assert cfg.label(L.label_job_id.key) == "label_run"


@pytest.mark.parametrize("key", ["job name", "-job", "a/b/c", "x" * 64])
def test_a_key_kubernetes_refuses_is_refused(tmp_path, key):
    with pytest.raises(config.ConfigError) as err:
        load(tmp_path, f"pod_job_label: {key!r}\n")
    assert err.value.problems[0].startswith(f"{tmp_path / 'obsgen.yaml'}: pod_job_label: "
                                            "must be a Kubernetes label key"), err.value.problems


def camel(fleet_kw: dict, faults=()) -> Fleet:
    return Fleet([Job(job_id=JOB)], kubernetes=True, gpus_per_node=8,
                 ksm_job_label="label_training_kubeflow_org_job_name", faults=faults, **fleet_kw)


slow = camel({"pod_per_rank": True}, (SlowGPU("gpu-node-000", 1, start=10 * MIN),))
# Idle GPUs share the job's hosts: only the pod map keeps them out of the job's spread.
# Were the camelCase label missed, the host map would take them in and TP would fire.
CASES = {
    "a pod label jobName under a prefix maps GPUs to the job: idle GPUs beside a healthy "
    "job fire nothing": Case([camel({})], 45, [Never(TP), Never(UNMAPPED)]),
    "a pod label jobName under a prefix: the slow GPU fires for the job's GPUs only": Case(
        [slow], 45, [Never(TP, end=24), At(30, TP, (tp(slow, 30, "gpu-node-000"),))]),
}


@pytest.mark.promtool
def test_a_camel_case_pod_label_maps_gpus_with_promtool(tmp_path):
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(test)")
    cfg.data["pod_job_label"] = "training.kubeflow.org/jobName"
    (tmp_path / "rules").mkdir()
    (tmp_path / "test.yaml").write_text(fixture_with("gpus", cfg, CASES, tmp_path / "rules"))
    result = promtool.test_rules([tmp_path / "test.yaml"])
    assert result.ok, result.output

"""The naive suite the scale benchmark compares obsgen with: the reference document's
alert rules (section 12, carried in benchmarks/reference/section-12.txt), verbatim, with the one
change that lets them evaluate at all.

The document's persistent-straggler rule compares per-rank maxima with the per-job
maximum using ``== on(job_id)``: many ranks on the left, one job on the right, which
Prometheus refuses ("many-to-one matching must be explicit (group_left/group_right)") as
soon as a job has two ranks. ``FIX`` adds ``group_left``, as the issue says; nothing else
is changed, so the cost measured is the document's. The series the document uses without
defining (``job_id_theoretical_bubble``, ``expected_rank_count``, kube-state-metrics' pod
phase and labels) are written by ``benchmarks/stream.py``.

Each rule becomes a group named after the obsgen family that replaces it, so each
family's group is compared with the naive rule for the same failure.
"""
from __future__ import annotations

import yaml

# Section 12 of the document, character for character (the YAML list it shows).
DOCUMENT = """\
- alert: Train_Straggler_Persistent
  expr: |
    count_over_time(
      (max by (job_id, rank) (rate(train_step_seconds_bucket[5m]))
       == on(job_id) max by (job_id) (rate(train_step_seconds_bucket[5m])))
    [30m:5m]) > 4
  for: 5m
  labels: { severity: warning }

- alert: Train_GradientExplosion
  expr: train_grad_norm > 10 * avg_over_time(train_grad_norm[1h])
  for: 0s
  labels: { severity: critical }

- alert: Train_Bubble_Excess
  expr: |
    1 - (sum by (job_id, stage) (rate(pipeline_stage_seconds_sum[5m]))
       / sum by (job_id, stage) (rate(train_step_seconds_sum[5m])))
    > 1.5 * job_id_theoretical_bubble
  for: 30m
  labels: { severity: warning }

- alert: Train_NoCheckpoints
  expr: |
    time() - max(train_checkpoint_timestamp_seconds) > 30 * 60   # 30 min since last
  for: 5m
  labels: { severity: warning }

- alert: Train_RankFailed
  expr: |
    count by (job_id) (
      kube_pod_status_phase{phase="Running"}
      * on(pod, namespace) group_left(job_id) kube_pod_labels
    ) < expected_rank_count
  for: 1m
  labels: { severity: critical }
"""

# The evaluation-error fix: the only edit to the document's rules.
FIX = ("== on(job_id) max by (job_id)", "== on(job_id) group_left max by (job_id)")

# The obsgen family (rule group) that replaces each of the document's alerts.
FAMILY = {
    "Train_Straggler_Persistent": "stragglers",
    "Train_GradientExplosion": "gradients",
    "Train_Bubble_Excess": "pipeline",
    "Train_NoCheckpoints": "checkpoints",
    "Train_RankFailed": "ranks",
}


def fixed_text() -> str:
    assert DOCUMENT.count(FIX[0]) == 1
    return DOCUMENT.replace(*FIX)


def rules_file() -> dict:
    """The naive suite as a Prometheus rule file: one group per rule, named
    ``naive-<family>``."""
    rules = yaml.safe_load(fixed_text())
    return {"groups": [{"name": f"naive-{FAMILY[r['alert']]}", "rules": [r]} for r in rules]}


def dump() -> str:
    return yaml.safe_dump(rules_file(), sort_keys=False, width=1000)

"""Measure when each alert first fires in the fixture cases that expect it to fire.

    python -m tests.promtool.latency

For every case with a firing check, the alert is probed every 30 s from minute 0 to
that check with promtool; the first firing time is printed as a markdown table.
"""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from obsgen import promtool

from . import build, support

ROOT = Path(__file__).resolve().parent.parent.parent


def first_firing(family: str, test: dict, alert: str, until: float) -> str:
    probe = dict(test)
    probe.pop("promql_expr_test", None)
    probe["alert_rule_test"] = [
        {"eval_time": support._minutes(m / 2), "alertname": alert, "exp_alerts": []}
        for m in range(0, int(until * 2) + 1)]
    fixture = yaml.safe_load(build.render_family(family))  # its interval and group order
    doc = {**fixture, "rule_files": [str(ROOT / "rules" / Path(f).name)
                                     for f in fixture["rule_files"]], "tests": [probe]}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as fh:
        yaml.safe_dump(doc, fh)
        fh.flush()
        proc = subprocess.run([promtool.find(), "test", "rules", fh.name],
                              capture_output=True, text=True)
    out = proc.stdout + proc.stderr  # promtool prints failures on stderr
    times = re.findall(rf"alertname: {alert}, time: ([0-9hms]+)", out)
    return times[0] if times else "never"


def main() -> int:
    print("| family | case | alert | first firing |\n|---|---|---|---|")
    for family in build.families():
        doc = yaml.safe_load(build.render_family(family))
        cases = __import__(f"tests.promtool.cases.{family}", fromlist=["CASES"]).CASES
        for test in doc["tests"]:
            case = cases[test["name"]]
            firing = {}
            for check in case.checks:
                if isinstance(check, support.At) and check.alerts:
                    firing.setdefault(check.alert, check.minute)
            for alert, until in firing.items():
                print(f"| {family} | {test['name']} | {alert} | "
                      f"{first_firing(family, test, alert, until)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The sidecar examples stay runnable: the pod spec shares the dump directory and passes
arguments the exporter accepts; the Slurm script is valid bash with valid arguments."""
from __future__ import annotations

import argparse
import re
import shlex
import subprocess
from pathlib import Path

import yaml

from obsgen.nccl import exporter

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "nccl-sidecar"


def parse_args(args: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(exit_on_error=False)
    exporter.add_arguments(p)
    return p.parse_args(args)


def test_kubernetes_sidecar_shares_an_emptydir_dump_directory():
    pod = next(d for d in yaml.safe_load_all((EXAMPLES / "kubernetes-sidecar.yaml").read_text())
               if d["kind"] == "Pod")
    volume = next(v for v in pod["spec"]["volumes"] if "emptyDir" in v)
    containers = {c["name"]: c for c in pod["spec"]["containers"]}
    trainer, sidecar = containers["trainer"], containers["nccl-exporter"]
    env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert env["NCCL_INSPECTOR_ENABLE"] == "1" and int(env["NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS"]) > 0
    mounts = {c: {m["name"]: m["mountPath"] for m in containers[c]["volumeMounts"]} for c in containers}
    assert mounts["trainer"][volume["name"]] == mounts["nccl-exporter"][volume["name"]] == env["NCCL_INSPECTOR_DUMP_DIR"]
    args = parse_args(sidecar["args"][1:])
    assert sidecar["args"][0] == "nccl-exporter"
    assert args.dump_dir == env["NCCL_INSPECTOR_DUMP_DIR"]
    assert sidecar["ports"][0]["containerPort"] == args.port


def test_slurm_example_is_valid_bash_with_valid_exporter_arguments():
    script = EXAMPLES / "slurm-per-node.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    cmd = re.search(r"exec obsgen nccl-exporter(.*?)'", script.read_text(), re.S).group(1)
    for var, value in {"$NCCL_INSPECTOR_DUMP_DIR": "/local/scratch/nccl-inspector/42",
                       "$(hostname -s)": "node-001", "$SLURM_NTASKS": "32"}.items():
        cmd = cmd.replace(var, value)
    args = parse_args(shlex.split(cmd.replace("\\\n", " ")))
    assert args.dump_dir == "/local/scratch/nccl-inspector/42" and args.world_size == 32
    assert [r.group for r in args.group_rule] == ["tp"]

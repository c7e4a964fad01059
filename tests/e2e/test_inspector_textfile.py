"""The NCCL Inspector's own textfile through a real node_exporter (Debian 12's textfile
collector) into a real Prometheus, with the nccl-inspector preset's rules: the files as
tests/inspector_prom_writer.py writes them from NCCL v2.30.7-1's inspector_prom.cc,
obsgen.instrument's ranks naming their host name and CUDA device. Each rank's figures land
on it; a file caught half-written is left out by node_exporter and the record keeps the
rank's newest dump."""
from __future__ import annotations

import copy
import os
import shutil
import socket
import sys
import textwrap

import pytest
from obsgen import config, dashboards, pipeline
from obsgen.contract import R

from ..inspector_prom_writer import Bucket, file_text, size_range
from . import harness

JOB, RANKS, SLOW = "insp-1", 4, 1
TP_US = {r: (1200.0 if r == SLOW else 1600.0) for r in range(RANKS)}  # the slow one waits least
NODE_EXPORTER = "prometheus-node-exporter"

INSTRUMENT = textwrap.dedent("""
    import sys, time
    from obsgen.instrument import Telemetry
    tels = [Telemetry(job_id="%s", rank=r, world_size=%d, addr="127.0.0.1", port_base=0,
                      sd_dir=sys.argv[1], node="gpu-node-000").start() for r in range(%d)]
    for r, t in enumerate(tels):
        t.gpu_info("GPU-%%08d-0000-0000-0000-000000000000" %% r, cuda_device=r)
    while True:
        for t in tels:
            with t.step():
                pass
        time.sleep(0.5)
""" % (JOB, RANKS, RANKS))


def write(dir_, rank: int, torn: bool = False) -> None:
    tp = Bucket("tp", "AllReduce", 8 << 20, RANKS, 1)
    text = file_text(socket.gethostname(), f"GPU{rank}", [(tp, 180.0, TP_US[rank])])
    if torn:  # the plugin rewrites in place: a reader can meet the first half
        text = text[: len(text) // 2 + 7]
    path = dir_ / f"nccl_inspector_metrics_GPU-{rank:08d}-0000-0000-0000-000000000000.prom"
    path.write_text(text)


def test_the_inspectors_textfile_lands_on_each_rank(procs, tmp_path):
    if not shutil.which(NODE_EXPORTER):  # CI must run it: make e2e-tools installs it
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(
            f"{NODE_EXPORTER} missing: run make e2e-tools")
    sd, textfiles = tmp_path / "sd", tmp_path / "textfiles"
    sd.mkdir()
    textfiles.mkdir()
    for r in range(RANKS):
        write(textfiles, r)
    exporter = harness.free_port()
    procs.start("inspector-node-exporter", [
        shutil.which(NODE_EXPORTER), "--collector.disable-defaults", "--collector.textfile",
        f"--collector.textfile.directory={textfiles}", f"--web.listen-address=127.0.0.1:{exporter}"])
    procs.start("inspector-instrument", [sys.executable, "-c", INSTRUMENT, str(sd)], cwd=harness.ROOT)
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(test)")
    cfg.data["presets"] = ["default", "nccl-inspector"]
    cfg.data["families"] = ["inspector"]
    cfg.data["dashboards"] = {**cfg.data["dashboards"], "enabled": False}
    (tmp_path / "inspector.yaml").write_text(pipeline.render_all(cfg)["rules/inspector.yaml"])
    prom = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(tmp_path / "inspector.yaml")],
            "scrape_configs": [
                {"job_name": "node", "static_configs": [{"targets": [f"127.0.0.1:{exporter}"]}]},
                {"job_name": "obsgen", "file_sd_configs": [
                    {"files": [str(sd / "*.json")], "refresh_interval": "1s"}]}]}
    p = harness.start_prometheus(procs, "inspector-prometheus", tmp_path, prom)
    record = R.inspector_time.name

    def mapped() -> dict[int, float]:
        return {int(s["metric"]["rank"]): float(s["value"][1])
                for s in p.query(f'{record}{{job_id="{JOB}"}}')}

    def logs() -> str:
        targets = [(t["scrapePool"], t["health"], t["lastError"])
                   for t in p.api("targets")["activeTargets"]]
        return "\n".join([f"targets: {targets}", f"mapped: {mapped()}",
                          f"served: {p.query('nccl_collective_exec_time_microseconds')}",
                          f"info: {p.query('train_rank_gpu_info')}",
                          f"node_exporter: {procs.log('inspector-node-exporter', 1500)}"])

    want = {r: us * 1e-6 for r, us in TP_US.items()}
    harness.wait_until("every rank's Inspector figures", lambda: mapped().keys() == want.keys(),
                       90, on_fail=logs)
    got = mapped()
    assert all(abs(got[r] - want[r]) < 1e-12 for r in want), got
    assert min(got, key=got.get) == SLOW  # the rank the others wait for
    sample = p.query(f'{record}{{rank="{SLOW}"}}')[0]["metric"]
    assert (sample["comm_name"], sample["collective"], sample["message_size"]) == (
        "tp", "AllReduce", size_range(8 << 20))

    # the DP view's NCCL Inspector row, as Grafana sends it: every query answers, and its
    # table puts the slow rank first (the least time against its communicators' median)
    full = copy.deepcopy(cfg.data)
    full["families"], full["dashboards"] = None, config.DEFAULTS["dashboards"]
    row = [q for q in dashboards.panel_queries(config.Config(full, "(test)"))
           if R.inspector_time.name in q.expr or R.inspector_busbw.name in q.expr]
    assert len(row) == 7, [q.panel for q in row]  # the spreads' 3 + the table + 3
    for q in row:
        assert p.query(q.promql(JOB)), (q.panel, q.ref)
    table = next(q for q in row if "quickest" in q.panel)
    ranked = sorted(p.query(table.promql(JOB)), key=lambda s: float(s["value"][1]))
    assert int(ranked[0]["metric"]["rank"]) == SLOW, ranked

    # a dump caught half-written: node_exporter leaves the file out of its scrape
    write(textfiles, 2, torn=True)
    harness.wait_until("node_exporter to refuse the half-written file",
                       lambda: [float(s["value"][1]) for s in p.query("node_textfile_scrape_error")] == [1.0],
                       30, on_fail=logs)
    harness.wait_until("the file's series to go stale",
                       lambda: not p.query('nccl_collective_exec_time_microseconds{gpu="GPU2"}'),
                       30, on_fail=logs)
    assert abs(mapped().get(2, 0) - want[2]) < 1e-12, mapped()  # the newest dump, kept
    write(textfiles, 2)
    harness.wait_until("the file to be read again",
                       lambda: [float(s["value"][1]) for s in p.query("node_textfile_scrape_error")] == [0.0],
                       30, on_fail=logs)

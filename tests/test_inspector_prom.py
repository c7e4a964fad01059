"""The nccl-inspector preset: the NCCL Inspector's own textfile (NCCL 2.30+), read as the
plugin writes it (tests/inspector_prom_writer.py, from inspector_prom.cc at v2.30.7-1).
The promtool cases are tests/promtool/cases/inspector.py; the live run through a real
node_exporter is tests/e2e/test_inspector_textfile.py."""
from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from obsgen import config, dashboards, pipeline, promtool, registry
from obsgen.contract import L, M

from .inspector_prom_writer import Bucket, InspectorJob, file_text, served, size_range

ROOT = Path(__file__).resolve().parent.parent


def cfg_with(presets: list[str], **extra) -> config.Config:
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(test)")
    cfg.data["presets"] = presets
    cfg.data.update(extra)
    return cfg


SIZES = {
    "an empty message is 0B": (0, "0B"),
    "under a KiB the range is in bytes": (1023, "1023-1024B"),
    "the smallest size the Inspector tracks by default (8192) is 8-9KB": (8192, "8-9KB"),
    "16 MiB is 16-17MB": (16 << 20, "16-17MB"),
    "one and a half GiB is 1-2GB": (3 << 29, "1-2GB"),
}


@pytest.mark.parametrize("case", SIZES, ids=list(SIZES))
def test_message_size_ranges_are_written_as_the_plugin_writes_them(case):
    nbytes, label = SIZES[case]
    assert size_range(nbytes) == label


def test_a_dump_is_two_lines_a_bucket_in_the_plugins_label_order_and_number_format():
    b = Bucket("tp", "AllReduce", 8 << 20, 4, 1)
    assert file_text("host-a", "GPU3", [(b, 183.123456789, 1234.5)]) == (
        'nccl_bus_bandwidth_gbs{version="v5.1",slurm_job_id="unknown",node="host-a",gpu="GPU3",'
        'comm_name="tp",n_nodes="1",nranks="4",collective="AllReduce",message_size="8-9MB",'
        'algo_proto="Ring_Simple"} 183.123\n'
        'nccl_collective_exec_time_microseconds{version="v5.1",slurm_job_id="unknown",node="host-a",'
        'gpu="GPU3",comm_name="tp",n_nodes="1",nranks="4",collective="AllReduce",'
        'message_size="8-9MB",algo_proto="Ring_Simple"} 1234.5\n')


def test_the_preset_reads_the_names_the_inspector_writes():
    """The metric names the rendered rules select, and the Inspector labels they copy or
    keep, are the ones in the plugin's own output: a renamed source (or a renamed
    contract entry) fails here."""
    cfg = cfg_with(["default", "nccl-inspector"])
    rules = yaml.safe_load(pipeline.render_all(cfg)["rules/inspector.yaml"])
    exprs = " ".join(r["expr"] for g in rules["groups"] for r in g["rules"])
    written = served(file_text("h", "GPU0", [(Bucket("tp", "AllReduce", 1 << 20, 2, 1), 1.0, 2.0)]))
    names = {dict(k)["__name__"] for k in written}
    labels = {n for k in written for n, _ in k} - {"__name__"}
    assert set(re.findall(r"\b(nccl_[a-z_]+)\[", exprs)) == names  # read over a window
    # the host and device are copied from the Inspector's labels by label_replace
    copied = set(re.findall(r'"\$1", "([a-z_]+)", "\(\.\*\)"', exprs))
    assert copied == {cfg.label(L.inspector_host.key), cfg.label(L.inspector_gpu.key)} <= labels
    kept = {cfg.label(k.key) for k in (L.comm_name, L.collective, L.message_size)}
    assert kept <= labels and all(f"{n}," in exprs or f"{n})" in exprs for n in kept)


def test_a_source_whose_names_changed_fails_the_fixture(tmp_path):
    """The committed fixture passes; the same fixture with the Inspector's time metric
    renamed in its input (as a new NCCL might) fails: the fixture reads the source's names."""
    fixture = ROOT / "tests" / "promtool" / "inspector.yaml"
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "inspector.yaml").write_text(
        (ROOT / "tests" / "promtool" / "rules" / "inspector.yaml").read_text())
    (tmp_path / "ok.yaml").write_text(fixture.read_text())
    assert promtool.test_rules([tmp_path / "ok.yaml"]).ok
    renamed = fixture.read_text().replace("nccl_collective_exec_time_microseconds{",
                                          "nccl_collective_exec_time_us{")
    (tmp_path / "renamed.yaml").write_text(renamed)
    assert not promtool.test_rules([tmp_path / "renamed.yaml"]).ok


def test_the_family_and_its_row_come_with_the_preset_only():
    def rendered(cfg):
        fams = [f.name for f in registry.build(cfg)]
        dp = next(v for v in dashboards.views(registry.build(cfg), cfg) if v.key == "dp")
        return "inspector" in fams, any("NCCL Inspector" in r.title for r in dp.rows)

    assert rendered(cfg_with(["default"])) == (False, False)
    assert rendered(cfg_with(["default", "nccl-inspector"])) == (True, True)
    # a families: list that leaves it out wins, and the dashboards then say what is missing
    with pytest.raises(Exception, match="add inspector to families"):
        pipeline.render_all(cfg_with(["default", "nccl-inspector"], families=[
            f.NAME for f in registry.FAMILIES if f.NAME not in ("inspector", "panels")]))


def test_the_preset_names_the_inspectors_labels_beside_obsgens_node_and_gpu():
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(test)")
    cfg.data["presets"] = ["default", "nccl-inspector"]
    assert config.validate(cfg.data, "(test)") == []
    assert (cfg.label(L.inspector_host.key), cfg.label(L.inspector_gpu.key)) == ("node", "gpu")
    assert (cfg.label(L.node.key), cfg.label(L.gpu.key)) == ("node", "gpu")
    # behind a target label node, Prometheus keeps the Inspector's as exported_node
    renamed = cfg_with(["default", "nccl-inspector"], labels={L.inspector_host.key: "exported_node"})
    assert config.validate(renamed.data, "(test)") == []
    text = pipeline.render_all(renamed)["rules/inspector.yaml"]
    assert '"exported_node", "(.*)"' in text


def test_the_writer_serves_one_series_per_bucket_and_rank_as_node_exporter_would():
    job = InspectorJob()
    first = next(s for s in job.run(60) if s.time == 30.0)
    inspector = [k for k in first.samples if dict(k)["__name__"].startswith("nccl_")]
    assert len(inspector) == 2 * 2 * job.hosts * job.gpus  # 2 metrics x 2 buckets per rank

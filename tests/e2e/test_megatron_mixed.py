"""Megatron's OpenTelemetry metrics beside obsgen.instrument, in a real Prometheus with the
scrape jobs of examples/prometheus/megatron-otel-mixed.yaml: the preset's rules join
Megatron's step histogram (labels nemo_run_id, dl_rank) with the instrument's world size
(job_id and rank, copied at the scrape) into one job whose ranks all progress."""
from __future__ import annotations

import copy
import shutil
import sys
import textwrap
from pathlib import Path

import yaml

from obsgen import config, pipeline
from obsgen.contract import R

from . import harness

EXAMPLE = harness.ROOT / "examples" / "prometheus" / "megatron-otel-mixed.yaml"
RUN, RANKS, STEP = "run-7", 2, 0.5

# Two ranks of obsgen.instrument, a step every STEP seconds, each writing its file_sd target.
# Port 0: each rank takes a port from the kernel (a fixed base would need base+1 free too).
INSTRUMENT = textwrap.dedent("""
    import sys, time
    from obsgen.instrument import Telemetry
    sd = sys.argv[1]
    tels = [Telemetry(job_id="%s", rank=r, world_size=%d, addr="127.0.0.1", port_base=0,
                      sd_dir=sd, node="gpu-node-000").start() for r in range(%d)]
    while True:
        for t in tels:
            with t.step():
                pass
        time.sleep(%r)
""" % (RUN, RANKS, RANKS, STEP))

# The OTel collector's prometheus exporter serving Megatron's series of every rank, as
# tests/megatron_writer.py derives them from Megatron's and NeMo Lens' code (log interval 1).
COLLECTOR = textwrap.dedent("""
    import sys, time, http.server
    from tests.megatron_writer import MegatronJob, STEP, GRAD, OTEL_BOUNDS
    job = MegatronJob(run_id="%s", ranks=%d, step_seconds=%r, log_interval=1, start=0.0)
    t0 = time.time()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            lines = ["# TYPE %%s histogram" %% STEP, "# TYPE %%s gauge" %% GRAD]
            obs = [ms for _, ms in job.logged(time.time() - t0)]
            for r in range(job.ranks):
                lab = {k: v for k, v in job.labels(r).items() if k not in ("job", "instance")}
                lab["job"], lab["instance"] = lab.pop("exported_job"), lab.pop("exported_instance")
                body = ",".join('%%s="%%s"' %% kv for kv in lab.items())
                for le in OTEL_BOUNDS:
                    lines.append('%%s_bucket{%%s,le="%%s"} %%d' %% (STEP, body, le, sum(1 for m in obs if m <= le)))
                lines.append('%%s_bucket{%%s,le="+Inf"} %%d' %% (STEP, body, len(obs)))
                lines.append("%%s_sum{%%s} %%r" %% (STEP, body, float(sum(obs))))
                lines.append("%%s_count{%%s} %%d" %% (STEP, body, len(obs)))
                lines.append("%%s{%%s} 1.0" %% (GRAD, body))
            data = ("\\n".join(lines) + "\\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
""" % (RUN, RANKS, STEP))


def test_the_preset_joins_megatron_and_the_instrument(procs, tmp_path):
    sd, collector = tmp_path / "sd", harness.free_port()
    sd.mkdir()
    procs.start("mixed-instrument", [sys.executable, "-c", INSTRUMENT, str(sd)],
                cwd=harness.ROOT)
    procs.start("mixed-collector", [sys.executable, "-c", COLLECTOR, str(collector)],
                cwd=harness.ROOT)
    cfg = config.Config(copy.deepcopy(config.DEFAULTS), "(test)")
    cfg.data["presets"], cfg.data["megatron_log_interval"] = ["megatron-otel"], 1
    # every group at the global 1 s interval: a 2m facts group would first run at an
    # offset of up to 2 minutes
    cfg.data["facts_interval"], cfg.data["family_intervals"] = None, None
    files = pipeline.render_all(cfg)
    for fam in ("ranks", "checkpoints"):
        (tmp_path / f"{fam}.yaml").write_text(files[f"rules/{fam}.yaml"])
    # the example's scrape jobs, pointed at this test's targets
    prom = yaml.safe_load(EXAMPLE.read_text())
    obsgen_job, otel_job = prom["scrape_configs"]
    obsgen_job["file_sd_configs"] = [{"files": [str(sd / "*.json")], "refresh_interval": "1s"}]
    otel_job["static_configs"] = [{"targets": [f"127.0.0.1:{collector}"]}]
    prom["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    prom["rule_files"] = [str(tmp_path / "ranks.yaml"), str(tmp_path / "checkpoints.yaml")]
    p = harness.start_prometheus(procs, "mixed-prometheus", tmp_path, prom)
    run = f'{{nemo_run_id="{RUN}"}}'

    def value(expr: str):
        res = p.query(expr)
        return float(res[0]["value"][1]) if len(res) == 1 else None

    def logs() -> str:
        targets = [(t["scrapePool"], t["health"], t["lastError"])
                   for t in p.api("targets")["activeTargets"]]
        return "\n".join([f"targets: {targets}", f"sd: {sorted(x.name for x in sd.iterdir())}"]
                         + [f"{n}: {procs.log(n, 800)}" for n in ("mixed-instrument",
                                                                   "mixed-collector")])
    harness.wait_until("the instrument's targets", lambda: len(list(sd.glob("*.json"))) == RANKS,
                       120, on_fail=logs)
    # the instrument's world size, under Megatron's run label
    harness.wait_until("the world size", lambda: value(R.world_size.name + run) == RANKS,
                       60, on_fail=logs)
    # every rank progresses, counted from Megatron's step histogram
    harness.wait_until("the ranks progressing",
                       lambda: value(R.ranks_progressing.name.format(**cfg["windows"]) + run) == RANKS,
                       60, on_fail=logs)
    mean = value(R.step_mean.name.format(**cfg["windows"]) + run)
    assert mean is not None and abs(mean - STEP) < 1e-6, mean
    # both sources are one job: no series is left under the instrument's labels alone
    assert value(f'count(train_world_size{{job_id="{RUN}", nemo_run_id=""}})') is None
    assert not [a for a in p.alerts() if a["labels"]["alertname"] == "Train_RankFailed"]

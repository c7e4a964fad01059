"""The NCCL sidecar end to end: a job writes NCCL Inspector dumps (tests/nccl_job.py, 16
ranks on four hosts whose clocks disagree by up to 35 ms), the real ``obsgen nccl-exporter``
console script follows them as a user runs it, the real Prometheus scrapes it and
evaluates the rules of the time-scaled profile, and Alertmanager routes what fires.

The job keeps appending while the tests run. Its groups: ``ep`` (the four ranks of a host,
AllGather, as Megatron's all-gather token dispatcher) and ``dp`` (ranks r, r + 4, r + 8,
r + 12, AllReduce). Every rank is on time until ONSET wall seconds (model minutes) after
the first scrape; from then on rank 5 reaches every collective 3 ms after the others. So
Train_Straggler_LateArrival must fire for rank 5 in both its groups, only after the onset,
and never for another rank, whose share of last arrivals the recorded ratio shows.

Groups of four, not two: an on-time rank of a two-rank group is last in about 40% of its
collectives, and in this job's first seconds, when the window holds few collectives,
chance alone takes such a rank to three quarters or more (a property of small windows, not of the
exporter). In groups of four, any ten consecutive collectives of this job give an on-time
rank at most 70%.

The exporter's own time constants (poll, state save, alignment timeout) are divided by
the profile's factor like Prometheus' and Alertmanager's (harness.nccl_exporter_flags).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

from obsgen import config, contract
from tests.nccl_job import InspectorJob, Truth

from . import dashboards, harness

JOB, LATE, LATE_NODE = "nccl-e2e", "5", "gpu-node-001"
LA = "Train_Straggler_LateArrival"
FRACTION = config.defaults()["thresholds"]["late_arrival_fraction"]  # the profile keeps it
LEAST = config.defaults()["thresholds"]["late_arrival_min_collectives"]  # in the ratio's window
OPS = {"ep": "AllGather", "dp": "AllReduce"}
ONSET = 20.0  # wall seconds after the first scrape until rank 5 turns late (model minutes)
LATE_US = 3000.0
# collectives per communicator and wall second: twice the LEAST a late-arrival ratio needs
# in its window (1 model minute: 1 wall second); written every TICK as many as are due, so
# a writer starved of the CPU for a moment catches up instead of falling under LEAST
RATE, TICK = 2 * LEAST, 0.1
RANKS = 16
OFFSETS = {"gpu-node-000": 15_000.0, "gpu-node-001": -20_000.0,  # host clocks, microseconds
           "gpu-node-003": 7_000.0}
OBSGEN = Path(sys.executable).with_name("obsgen")
SCRAPE = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
          "scrape_samples_post_metric_relabeling", "scrape_series_added"}
SUFFIXES = ("_bucket", "_sum", "_count")


def node_of(rank: str) -> str:
    return f"gpu-node-{int(rank) // 4:03d}"


class Writer(threading.Thread):
    """The training job: RATE collectives per second on every communicator, appended to
    the ranks' dump files every TICK seconds; rank 5 late from ``onset_at`` (wall time) on."""

    def __init__(self, job: InspectorJob, dump: Path):
        super().__init__(name="inspector-job", daemon=True)
        self.job, self.dump = job, dump
        self.truth = Truth()
        self.step = 0
        self.started: float | None = None
        self.onset_at: float | None = None
        self.onset: float | None = None  # wall time of the first late collective
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def write(self) -> None:
        if self.onset is None and self.onset_at is not None and time.time() >= self.onset_at:
            self.job.late = {int(LATE): LATE_US}
            self.onset = time.time()
        now = time.monotonic()
        self.started = self.started or now
        due = int((now - self.started) * RATE) + 1 - self.step  # one at the start
        if due <= 0:
            return
        self.job.run(self.dump, due, start_step=self.step, truth=self.truth, ops=OPS)
        self.step += due

    def run(self) -> None:
        try:
            while not self._halt.wait(TICK):
                self.write()
        except BaseException as exc:  # noqa: BLE001 - reported by the tests
            self.error = exc

    def stop(self) -> Truth:
        self._halt.set()
        if self.is_alive():
            self.join(10)
        assert self.error is None, repr(self.error)
        return self.truth


def firing(stack, span: float) -> set[tuple]:
    return {(s["metric"]["alertname"], s["metric"].get("rank"), s["metric"].get("group"))
            for s in stack.prom.query(f'max_over_time(ALERTS{{alertstate="firing", '
                                      f'job_id="{JOB}"}}[{int(span) + 2}s])')}


def ratios(stack) -> str:
    return "\n".join(f"{s['metric'].get('rank')} {s['metric'].get('group')}: {s['value'][1]}"
                     for s in stack.prom.query(f'{{__name__=~"job_rank_group:nccl_collective_'
                                               f'last_arrival:.*", job_id="{JOB}"}}'))


def diagnosis(stack, port: int, procs, writer: Writer) -> str:
    """What a missed LateArrival leaves to read: the writer's pace, the scrapes of the last
    10 s, the aligned collectives a ratio needs, the ratios, the series Prometheus holds for
    the job by name, the rule group's last evaluation, the exporter's own counters and log."""
    def one(expr: str) -> str:
        return ", ".join(f"{s['metric'].get('group', '')} {s['value'][1]}".strip()
                         for s in stack.prom.query(expr))

    pace = writer.step / (time.monotonic() - writer.started) if writer.started else 0.0
    scrape, job = f'job="{harness.NCCL_SCRAPE_JOB}"', f'job_id="{JOB}"'
    per_window = 60 / stack.speed  # the ratio's 1m in wall seconds
    names = stack.prom.query(f'count by (__name__) ({{{job}, __name__=~"nccl_.*|obsgen_nccl_.*"}})')
    groups = [g for g in stack.prom.api("rules")["groups"] if g["name"] == "obsgen-nccl"]
    served = [line for line in harness.get(f"http://127.0.0.1:{port}/metrics", timeout=2).decode()
              .splitlines() if line.startswith("obsgen_nccl_") and "unrecorded" not in line][:20]
    return (f"writer: {writer.step} collectives per communicator, {pace:.1f}/s (RATE {RATE})\n"
            f"scrapes of the last 10 s: {one(f'count_over_time(up{{{scrape}}}[10s])')} up, "
            f"{one(f'max_over_time(scrape_duration_seconds{{{scrape}}}[10s])')} s at most\n"
            f"aligned per ratio window over the last 5 s, the least rank by group ({LEAST} needed): "
            f"{one(f'min by (group) (rate(nccl_collective_aligned_total{{{job}}}[5s])) * {per_window:g}')}\n"
            f"ratios:\n{ratios(stack)}\nseries by name: "
            f"{ {s['metric'].get('__name__'): s['value'][1] for s in names} }\n"
            f"obsgen-nccl's last evaluation and its seconds: "
            f"{[(g.get('lastEvaluation'), g.get('evaluationTime')) for g in groups]}\n"
            "exporter:\n" + "\n".join(served) + f"\n{procs.log('nccl-exporter')}")


@pytest.fixture(scope="module")
def sidecar(stack, procs, tmp_path_factory):
    """The job writing, the exporter scraped; yields once LateArrival fired and Alertmanager
    notified it, with the job still writing."""
    dump = tmp_path_factory.mktemp("nccl") / "nccl-inspector-dump"
    job = InspectorJob(ranks=RANKS, per_node=4, tp=4, inner="ep", job_id=JOB,
                       clock_offset_us=OFFSETS)
    job.write_group_maps(dump)  # the training processes' group maps: job_id, ranks, groups
    writer = Writer(job, dump)
    writer.write()  # the files exist before the exporter starts
    with open(job.path(dump, job.procs[0]), "a") as fh:
        fh.write('{"header":{"id":"0x7f8c496ae9f600","rank":0\n')  # one malformed line
    writer.start()
    try:
        port = harness.free_port()
        env = {k: v for k, v in os.environ.items()  # job id from the maps, node from the records
               if k not in ("OBSGEN_JOB_ID", "SLURM_JOB_ID", "NODE_NAME", "NCCL_INSPECTOR_DUMP_DIR")}
        procs.start("nccl-exporter", [
            str(OBSGEN if OBSGEN.exists() else shutil.which("obsgen")), "nccl-exporter",
            "--dump-dir", str(dump), "--address", "127.0.0.1", "--port", str(port),
            *harness.nccl_exporter_flags(stack.speed)], env=env)
        harness.wait_until("the exporter serving its records", lambda: b"obsgen_nccl_records_total{"
                           in harness.get(f"http://127.0.0.1:{port}/metrics", timeout=2), 30,
                           on_fail=lambda: procs.log("nccl-exporter"))
        (stack.nccl_sd / "nccl-exporter.json").write_text(json.dumps(
            [{"targets": [f"127.0.0.1:{port}"]}]))
        harness.wait_until("the exporter scraped", lambda: stack.prom.query(
            f'up{{job="{harness.NCCL_SCRAPE_JOB}"}} == 1'), 30)
        up = time.time()
        writer.onset_at = up + ONSET
        harness.wait_until(f"{LA} for rank {LATE} in both its groups", lambda: {
            (LA, LATE, g) for g in OPS} <= firing(stack, time.time() - up), ONSET + 45,
            on_fail=lambda: diagnosis(stack, port, procs, writer))
        # both alerts share a notification group (alert, job): the second one follows at the
        # next group_interval
        harness.wait_until("Alertmanager's notifications", lambda: set(OPS) <= {
            labels.get("group") for _, _, labels in stack.webhook.received()
            if labels.get("job_id") == JOB}, 30)
        yield {"writer": writer, "up": up, "port": port}
    finally:
        writer.stop()
        procs.stop("nccl-exporter")


def test_the_exporter_is_scraped_and_its_series_carry_the_contract_labels(stack, sidecar):
    targets = [t for t in stack.prom.api("targets")["activeTargets"]
               if t["labels"]["job"] == harness.NCCL_SCRAPE_JOB]
    assert [t["health"] for t in targets] == ["up"], targets
    series = stack.prom.api("series", **{"match[]": f'{{job="{harness.NCCL_SCRAPE_JOB}"}}',
                                         "start": f"{sidecar['up']:.3f}"})
    served = {m for m, c in contract.METRICS.items() if c.emitter in (
        contract.NCCL_EXPORTER, contract.NCCL_SIDECAR)}
    seen = set()
    for s in series:
        name = s["__name__"]
        if name in SCRAPE or name.startswith("process_"):
            continue
        base = next((name.removesuffix(x) for x in SUFFIXES
                     if name.endswith(x) and name.removesuffix(x) in served), name)
        assert base in served, f"{name}: not a series of the exporter in the contract"
        metric = contract.METRICS[base]
        expected = {"__name__", "job", "instance", *metric.labels}
        if name.endswith("_bucket"):
            expected.add("le")
        assert set(s) == expected, (name, s)
        assert s["job_id"] == JOB, s  # from the group maps the job wrote
        if "group" in s:
            assert s["group"] in OPS, s  # named by the group maps, not unknown or tp
        if "op" in s:
            assert s["op"] == OPS[s["group"]], s
        if "rank" in s:
            assert s["rank"] in {str(r) for r in range(RANKS)}, s  # global, not comm ranks
        if "node" in s:
            assert s["node"] == node_of(s["rank"]), s
        seen.add(base)
    # every series but the expired alignments' (none expire here) and the Send/Recv peers'
    # (this job's communicators run collectives only) is served
    assert seen == served - {"obsgen_nccl_alignment_incomplete_total", "nccl_p2p_seconds_total",
                             "nccl_p2p_bytes_total", "nccl_p2p_transfers_total"}, served ^ seen
    per_rank = stack.prom.query(f'count by (group) (nccl_collective_last_arrival_total{{job_id="{JOB}"}})')
    assert {s["metric"]["group"]: s["value"][1] for s in per_rank} == {g: str(RANKS) for g in OPS}


def test_late_arrival_fires_for_the_late_rank_only_and_after_it_turned_late(stack, sidecar):
    up, onset = sidecar["up"], sidecar["writer"].onset
    assert onset is not None
    span = time.time() - up
    assert firing(stack, span) == {(LA, LATE, "ep"), (LA, LATE, "dp")}  # nothing else, no one else
    first = {}
    for s in stack.prom.query(f'min_over_time(timestamp(ALERTS{{alertstate="firing", '
                              f'job_id="{JOB}"}})[{int(span) + 2}s:250ms])'):
        first[s["metric"]["group"]] = float(s["value"][1])
        m = s["metric"]
        assert (m["node"], m["severity"], m["team"]) == (LATE_NODE, "warning", "platform"), m
    for group, t in first.items():
        assert t >= onset, f"{group}: fired {onset - t:.1f} s before rank {LATE} turned late"
        print(f"{LA} ({group}): {(t - onset) * stack.speed / 60:.1f} model minutes after the onset")
    # under 3 model minutes to cross nine tenths of the 3-minute window, 1 of for, and the
    # scrapes, the rule and the exporter's alignment timeout of a loaded machine
    # (and the machine's stalls meanwhile, which stop the writer, the exporter and the rules)
    assert max(first.values()) - onset < 10 + harness.STALLS.within(onset, max(first.values())), first


def test_the_on_time_ranks_are_judged_and_never_late(stack, sidecar):
    """Not firing because there was nothing to judge would prove nothing: every rank has
    a late-arrival ratio in both groups, and only rank 5's ever passes the rule's
    late_arrival_fraction, and only after it turned late."""
    up, onset = sidecar["up"], sidecar["writer"].onset
    sel = f'{{__name__=~"job_rank_group:nccl_collective_last_arrival:.*", job_id="{JOB}"}}'
    peak = {(s["metric"]["rank"], s["metric"]["group"]): float(s["value"][1])
            for s in stack.prom.query(f"max_over_time({sel}[{int(time.time() - up)}s])")}
    assert set(peak) == {(str(r), g) for r in range(RANKS) for g in OPS}, sorted(peak)
    on_time = {k: v for k, v in peak.items() if k[0] != LATE}
    assert max(on_time.values()) <= FRACTION, on_time
    assert min(peak[(LATE, g)] for g in OPS) > FRACTION, peak
    before = {(s["metric"]["rank"], s["metric"]["group"]): float(s["value"][1])
              for s in stack.prom.query(f"max_over_time({sel}[{int(onset - up)}s])", onset)}
    assert before and max(before.values()) <= FRACTION, before


def test_alertmanager_routes_it_to_the_platform_warning_receiver(stack, sidecar):
    got = {(receiver, status, labels["alertname"], labels["rank"], labels["group"])
           for receiver, status, labels in stack.webhook.received() if labels.get("job_id") == JOB}
    assert got == {("obsgen-platform-warning", "firing", LA, LATE, g) for g in OPS}, got


def title(where: str) -> str:
    """The panel title in a query's JSON path, ``$.panels[3 'row'].panels[0 'title'].targets...``."""
    return re.search(r"\[\d+ '((?:(?!'\]).)*)'\]\.targets", where).group(1)


def sidecar_queries(stack, names: set[str]) -> list[tuple[dashboards.Query, str]]:
    """The panel queries of the DP and EP dashboards that read only series the exporter
    serves (directly or through the recording rules), as Grafana sends them for JOB."""
    inputs = dashboards.recorded_inputs(stack.rendered / "rules")
    out = []
    for view in ("dp", "ep"):
        for q in dashboards.queries(stack.rendered / "dashboards" / f"{view}.json"):
            expr = dashboards.substitute(q.expr, JOB, stack.speed, q.variables)
            read = set().union(*(inputs.get(n, {n}) for n in dashboards.metric_names(expr)))
            if read and read <= names:
                out.append((q, expr))
    return out


def test_the_dp_and_ep_panels_that_read_the_sidecar_show_the_job(stack, sidecar):
    names = set(stack.prom.api("label/__name__/values",
                               **{"match[]": f'{{job="{harness.NCCL_SCRAPE_JOB}"}}'}))
    queries = sidecar_queries(stack, names)
    panels = {(q.dashboard, title(q.where)) for q, _ in queries}
    for view in ("dp.json", "ep.json"):  # the aligned rows (obsgen/dashboards/aligned.py)
        assert (view, "Arrival skew vs tail per collective (aligned)") in panels, panels
        assert any(d == view and t.startswith("Last arrivals:") for d, t in panels), panels
    end = time.time()
    step = 30 / stack.speed
    empty = []
    for q, expr in queries:
        answer = stack.prom.query_range_raw(expr, end - 10, end, step)
        assert answer.get("status") == "success", (q.where, answer)
        if not any(r.get("values") for r in answer["data"]["result"]):
            empty.append(f"{q.dashboard}: {q.where}: {expr}")
    assert not empty, "\n".join(empty)
    # what the tables show: rank 5 first among the late arrivals of both groups
    for q, expr in queries:
        if title(q.where).startswith("Last arrivals:"):
            (top, *_) = sorted(stack.prom.query(expr), key=lambda s: -float(s["value"][1]))
            assert top["metric"]["rank"] == LATE and float(top["value"][1]) > FRACTION, (q.where, top)
        if title(q.where).startswith("Late arrivals:"):  # DP: the least time inside the all-reduce
            (least, *_) = sorted(stack.prom.query(expr), key=lambda s: float(s["value"][1]))
            assert least["metric"]["rank"] == LATE, (q.where, least)
    print(f"{len(queries)} panel queries of dp.json and ep.json read the sidecar; all have data")


def test_the_exporter_counted_every_record_the_job_wrote(stack, sidecar):
    """Last: the job stops writing; what Prometheus scraped is what the job wrote, per
    rank, op and group (the alignment per rank and group), and the one malformed line was
    counted and skipped."""
    truth = sidecar["writer"].stop()

    def scraped(metric: str, *labels: str) -> dict:
        return {tuple(s["metric"][k] for k in labels): float(s["value"][1])
                for s in stack.prom.query(f'{metric}{{job_id="{JOB}"}}')}
    records = f'obsgen_nccl_records_total{{job_id="{JOB}"}}'
    harness.wait_until("every record scraped", lambda: stack.prom.query(
        f"{records} == {truth.records}"), 15,
        on_fail=lambda: f"{stack.prom.query(records)} of {truth.records}")
    assert scraped("nccl_collective_bytes_total", "rank", "op", "group") == {
        k: float(v) for k, v in truth.bytes.items()}
    assert scraped("nccl_collective_aligned_total", "rank", "group") == {
        k: float(v) for k, v in truth.aligned.items()}
    (errors,) = stack.prom.query(f'obsgen_nccl_parse_errors_total{{job_id="{JOB}"}}')
    assert errors["value"][1] == "1"
    print(f"{truth.records} records of {sidecar['writer'].step} steps")

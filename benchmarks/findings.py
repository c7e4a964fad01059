"""The prose of RESULTS.md: what the numbers say, what changed with its before/after on
the same data, what was tried and not kept, and the run without the unread buckets."""
from __future__ import annotations

from .measures import (GROUP_TARGET_MS, PANEL_TARGET_MS, family, fmt_mib, fmt_ms, panels_of,
                       per_evaluation, per_series_us, slowest_panel, suite, total_ms)

def findings(ss: list[dict]) -> list[str]:
    """What the numbers say, and what was tried for the targets they miss."""
    big = ss[-1]
    N = big["ranks"]
    slow = {p: v for p, v in panels_of(big).items() if v["ms"] >= PANEL_TARGET_MS}
    groups = suite(big, "obsgen")
    over = {g: v for g, v in groups.items() if v["ms"] >= GROUP_TARGET_MS}
    per_rank = big["counts"]["all"] / N
    training = sum(v for k, v in big["emitters"].items() if k.startswith("the training"))
    buckets = sum(v for k, v in big["series_per_rank"].items() if k.endswith("_bucket"))
    out = ["## Findings", "",
           f"- At {N:,} ranks, {len(over)} of {len(groups)} rule groups take 1 s or more "
           f"({', '.join(sorted(over)) or 'none'}) and {len(slow)} of "
           f"{len(panels_of(big))} panels take 2 s or more over 1 h. Every one of them does "
           "per-rank (per-GPU, per-host) work: cost is series touched x steps, and a plain "
           f"selector costs {per_series_us(big) or 0:.0f} µs per series here (blocks on disk, "
           "shared CPU). Nothing grows faster than N (see k above): there is no quadratic "
           "join, only many linear ones.",
           f"- The job has {per_rank:.0f} series per rank, {training:.0f} from the training "
           "process and its NCCL sidecar (6 collective op/group pairs with their histograms; "
           "`obsgen.instrument` alone serves 84 with default settings, see `obsgen plan`), "
           f"{buckets:g} of them `_bucket` series ({buckets / 15:g} histograms x 15 "
           "default buckets); obsgen's rules and panels read none of them (means come from "
           "`_sum`/`_count`), only the naive straggler rule reads `train_step_seconds_bucket`. "
           "`examples/prometheus/drop-unread-buckets.yaml` drops them at the scrape "
           "(`metric_relabel_configs`; `obsgen plan` counts them). Measured below (\"Without "
           "the unread buckets\"), that leaves what the rules and panels cost where it was: "
           "they look up the same series by name, and a smaller index does not make that "
           "cheaper; it cuts the memory and disk of the Prometheus that holds the job. For "
           "the panels the lever left is per-host aggregates exported at the source for "
           "dashboard-only signals (the issue's \"pre-aggregation per node\").",
           "- Families evaluated less often: the pipeline bubble (30 minutes of `for`), the "
           "fabric (10 minutes of `for` on IB, an hour of link recoveries) and the late "
           "arrivals (15 minutes), checkpoints (a 30-minute age, an hour's overhead) and "
           "restarts (an hour) wait on windows of 10 minutes or more, and were about half of "
           "what the groups cost per 30 s. `family_intervals` (new config key) evaluates them "
           "at about a fifteenth of the shortest window or `for` they read: the first three "
           "every 1m, checkpoints and recovery every 2m. An alert of theirs fires at most one "
           "interval later, and the ruler does a half or a quarter of their work. The "
           "stragglers, ranks, GPUs, gradients and progress stay at 30 s. Before / after in "
           "ruler time per 30 s, the interval alone (the same rules, but checkpoints also records "
           "checkpoints per second for the dashboards, below): checkpoints "
           + "; ".join(_before_after_ratio(s, ("obsgen-checkpoints",)) for s in ss)
           + "; recovery " + "; ".join(_before_after_ratio(s, ("obsgen-recovery",)) for s in ss)
           + "; nccl " + "; ".join(_before_after_ratio(s, ("obsgen-nccl",)) for s in ss) + ".",
           "- A join for a label the series could carry: the all-reduce hosts (`obsgen-fabric`) "
           "joined every rank's all-reduce rate with the node of its newest `train_world_size` "
           "(a topk over every rank's series), because the NCCL sidecar's collective series had "
           "no host label. The sidecar now names the rank's host on them, as obsgen.instrument "
           "does and as it did on its alignment counters, and the rule aggregates by it: "
           + _rules_before_after(big, "obsgen-fabric", ("job_node:nccl_allreduce:active5m",))
           + " per evaluation; fabric family before / after in ruler time per 30 s (with the "
           "1m interval): " + "; ".join(_before_after_ratio(s, ("obsgen-fabric",)) for s in ss) + ".",
           "- Records nothing reads but the next rule: the bubble was a busy ratio recorded "
           "for every rank, then averaged per stage; it is now the ratio of the stage's sums "
           "(the ranks of a synchronous job share the step's wall time, so the value is the "
           "same), one record per stage: "
           + _rules_before_after(big, "obsgen-pipeline", ("job_rank:pipeline_stage_busy:ratio5m",
                                                          "job_stage:pipeline_bubble:ratio5m"))
           + ". The ranks progressing were counted from a record of every rank's steps; they "
           "are counted from the raw counts in one rule: "
           + _rules_before_after(big, "obsgen-ranks", ("job_rank:train_steps:increase2m",
                                                       "job:train_ranks_progressing:count"))
           + ". Family before / after in ruler time per 30 s: pipeline "
           + "; ".join(_before_after_ratio(s, ("obsgen-pipeline",)) for s in ss)
           + "; ranks " + "; ".join(_before_after_ratio(s, ("obsgen-ranks",)) for s in ss) + ". "
           "(What these benchmark times count is the query; the ruler also writes every "
           "recorded series, 16,384 of them per per-rank record, which they do not count.)",
           "- Panels that recompute what a rule records: the checkpoint interval read an hour "
           "of every rank's checkpoint counters at each of 121 steps, the checkpoint duration "
           "and throughput every rank's counters, the IB spread of the job's hosts every HCA "
           "port of the cluster joined to the job, the TP spread per host every GPU joined to "
           "its rank. They now read the job records the alerts compute (one series per job, "
           "or per host of the job): the checkpoints family's rates (and a new "
           "`job:train_checkpoint:rate5m`, checkpoints per second, for checkpoints per hour "
           "and seconds per checkpoint), the fabric family's IB rate of the job's hosts in "
           "all-reduce windows (what Train_IB_Asymmetry compares), the GPU family's SM-active "
           "spread (what Train_TP_Imbalance reads). Before / after at " + f"{N:,}" + " ranks: "
           + "; ".join(_panel_before_after(big, p) for p in (
               "Training · Recovery / Checkpoint interval: actual vs optimal",
               "Training · Recovery / Duration per checkpoint",
               "Training · Recovery / Checkpoint write throughput",
               "Training · DP / InfiniBand transmit of the job's hosts",
               "Training · TP / SM-active spread within a host (top 10)")) + ".",
           "- Earlier changes, measured in earlier runs (`git log benchmarks/RESULTS.md`), at "
           "16,384 ranks unless said: job facts (world size, planned steps, pipeline shape, "
           "deadline, hosts and GPUs) in a facts group of their family every `facts_interval` "
           "(2m) instead of re-read from every rank every 30 s (gpus 1.35x, ranks 1.20x, "
           "pipeline 1.26x, progress 3.79x in ruler time per 30 s); the straggler flag "
           "recorded only while a rank straggles (straggler family 1.32x); hardware panels "
           "that aggregate per host before they relabel, and the clock reasons tested as "
           "`(x >= bit) % (2 * bit) >= bit` (GPUs held below full clocks 36,256 -> 1,931 ms, "
           "ECC errors per host 5,719 -> 2,331 ms); the sidecar's alignment counters per "
           "(rank, group) with the host on them (late-arrival family 3.17x); the straggler "
           "records keep the `node` label (1.20x); the ETA from the ranks family's job "
           "records (progress 6.21x); `obsgen-checkpoints` and `obsgen-recovery` from "
           "job-level records of the rate window (1.87x at 4,096 ranks); `obsgen-gpus` from "
           "sparse per-GPU event records (1.38x at 4,096 ranks).",
           "- What is left: " + _left(big),
           "- Tried and not merged: a recording-rule family that pre-aggregates every "
           "dashboard panel per job (on the code before issue 9, a local experiment not kept "
           "in the repository). Measured once at 4,096 ranks on this machine, on the "
           "same kind of data: the slowest panel fell from 18,336 ms (NVLink throughput per "
           "GPU) to 343 ms, but the family cost 8,651 ms per evaluation, 3.8x all alerting "
           "groups together (2,288 ms), every 30 s whether anyone looks or not. Moving "
           "per-rank work from the panels into the ruler does not remove it; at 16,384 ranks "
           "it would not fit a 30 s interval on this machine. Worth it only for a few panels "
           "that are open all the time, in a group with a longer interval.",
           ""]
    return out


DROP_BUCKETS = "results-drop-buckets.json"


def _drop_buckets_data_only(ss: list[dict], other: dict) -> list[str]:
    rows = []
    for s in ss:
        o = other["sizes"].get(str(s["ranks"]))
        if o:
            rows.append(f"| {s['ranks']:,} | {s['counts']['all'] / s['ranks']:.0f} / "
                        f"{o['counts']['all'] / o['ranks']:.0f} | "
                        f"{fmt_mib(s['memory']['obsgen']['panels_peak_rss'])} / "
                        f"{fmt_mib(o['memory']['obsgen']['panels_peak_rss'])} | "
                        f"{s['built']['tsdb_bytes'] / 2**30:.2f} / {o['built']['tsdb_bytes'] / 2**30:.2f} |")
    if not rows:
        return []
    return ["## Without the unread buckets", "",
            "The same job scraped through `examples/prometheus/drop-unread-buckets.yaml` (no "
            "`_bucket` series; no obsgen rule or panel reads one), measured by `python -m "
            f"benchmarks.scale --drop-buckets` in a separate run ({DROP_BUCKETS}) on the rules "
            "as they were before this run's changes, so only what the data itself costs is "
            "compared here: kept (this run) / dropped. On the same rules (commit df8e6dc) "
            "rule and panel times were within 5% with and without the buckets at every size "
            "(16,384 ranks: all groups 4,602 / 4,705 ms, slowest panel 37,618 / 39,212 ms): "
            "the rules and panels look up the same series either way.", "",
            "| ranks | series per rank | peak RSS MiB of the process that ran everything | TSDB GiB |",
            "|---:|---:|---:|---:|", *rows, ""]


def drop_buckets_finding(ss: list[dict], other: dict | None, sha: str | None = None) -> list[str]:
    """The same job scraped without its histograms' _bucket series (``--drop-buckets``,
    saved as results-drop-buckets.json beside results.json), size by size. Times are
    compared only when both runs measured the same rules (``rules_sha``); otherwise the
    data's own numbers are (series, memory, disk)."""
    if not other:
        return []
    if not sha or other.get("rules_sha") != sha:
        return _drop_buckets_data_only(ss, other)
    rows = []
    for s in ss:
        o = other["sizes"].get(str(s["ranks"]))
        if not o:
            continue
        a, b = total_ms(s, "obsgen"), total_ms(o, "obsgen")
        pa, pb = slowest_panel(s)[1]["ms"], slowest_panel(o)[1]["ms"]
        ma, mb = s["memory"]["obsgen"], o["memory"]["obsgen"]
        rows.append(
            f"| {s['ranks']:,} | {s['counts']['all'] / s['ranks']:.0f} / "
            f"{o['counts']['all'] / o['ranks']:.0f} | {fmt_ms(a)} / {fmt_ms(b)} ({a / b:.2f}) | "
            f"{fmt_ms(pa)} / {fmt_ms(pb)} ({pa / pb:.2f}) | {fmt_mib(ma['rules_peak_rss'])} / "
            f"{fmt_mib(mb['rules_peak_rss'])} | {fmt_mib(ma['panels_peak_rss'])} / "
            f"{fmt_mib(mb['panels_peak_rss'])} | {s['built']['tsdb_bytes'] / 2**30:.2f} / "
            f"{o['built']['tsdb_bytes'] / 2**30:.2f} |")
    if not rows:
        return []
    return ["## Without the unread buckets", "",
            "The same job scraped through `examples/prometheus/drop-unread-buckets.yaml` (no "
            "`_bucket` series; no obsgen rule or panel reads one), measured by `python -m "
            f"benchmarks.scale --drop-buckets` in a separate run ({DROP_BUCKETS}; the machine "
            "otherwise as above): kept / dropped, in brackets kept over dropped. The rules "
            "and panels read the same series either way; what changes is the index they are "
            "looked up in, and the memory and disk of everything else.", "",
            "| ranks | series per rank | all groups ms | slowest panel ms | peak RSS MiB: rules | "
            "peak RSS MiB: all | TSDB GiB |",
            "|---:|---:|---:|---:|---:|---:|---:|", *rows, ""]


def after_groups(size: dict, group: str) -> dict:
    """The current groups of ``group``'s family: the family's group and its facts group."""
    return {g: v for g, v in suite(size, "obsgen").items() if family(g) == family(group)}


def before_groups(size: dict, group: str) -> dict:
    """The baseline's groups of ``group``'s family (its group and its facts group)."""
    return {g: v for g, v in suite(size, "before").items()
            if family(g.removeprefix("before:")) == family(group)}


def _before_after_ratio(size: dict, groups=("obsgen-stragglers",)) -> str:
    """Before over after, in ruler time per 30 s (a group every 2m counts a quarter)."""
    b = [before_groups(size, g) for g in groups]
    a = [after_groups(size, g) for g in groups]
    if not all(b) or not all(a):
        return f"not measured at {size['ranks']:,} ranks"
    ratio = (sum(per_evaluation(v) for x in b for v in x.values())
             / sum(per_evaluation(v) for x in a for v in x.values()))
    return f"{ratio:.2f} at {size['ranks']:,} ranks"


def _rules_before_after(size: dict, group: str, names: tuple[str, ...]) -> str:
    """The median ms per evaluation of ``names`` in the baseline's ``group`` (a record the
    current rules write differently is measured as ``<name>_before``) against the current
    group's ``names`` that still exist."""
    before = size["groups"].get("before:" + group, {}).get("rules", {})
    after = size["groups"].get(group, {}).get("rules", {})
    b = sum(before.get(n, before.get(n + "_before", 0.0)) for n in names)
    a = sum(after.get(n, 0.0) for n in names)
    if not b or not a:
        return "not measured"
    return f"{fmt_ms(b)} -> {fmt_ms(a)} ms at {size['ranks']:,} ranks ({b / a:.2f}x)"


def _left(size: dict) -> str:
    """What the targets still miss, and the levers not taken."""
    N = size["ranks"]
    total = total_ms(size, "obsgen")
    mean = size["groups"].get("obsgen-stragglers", {}).get("rules", {}).get(
        "job_rank:train_compute_seconds:mean5m")
    ruler = (f"the groups cost {fmt_ms(total)} ms per 30 s at {N:,} ranks "
             f"({'under' if total < 3000 else 'over'} the 3 s target). ")
    return (ruler + "What they spend is rules that read every rank's raw series once, each "
            "needed (the slowest rules above). One lever is not taken: a config naming the "
            "platform would let the SM-active spread read dcgm-exporter once instead of "
            "twice (it computes the Kubernetes pod map and the bare-metal host map and keeps "
            "the better per host; measured at 4,096 ranks, 107 ms for both, 57 for the pod "
            "map alone). The panels are far from 2 s, and no rewrite of their queries closes "
            "it: a range query pays, at each of its 121 steps, for every series' label set in "
            "every aggregation and binary operator, not for samples. Measured once at 4,096 "
            "ranks on a kept TSDB, the slowest of `TP / Time inside TP collectives across "
            "ranks` (3 op series per rank): the rate alone 194 ms, summed per rank 693 ms, "
            "the per-rank mean (sum over count) and its max 2,121 ms; the NVLink spread "
            "aggregated per GPU before its join 1,549 ms against 1,645. The spread that reads "
            "a per-rank record, `Overview / Compute time across ranks`, takes "
            + fmt_ms(panels_of(size).get("Training · Overview / Compute time across ranks", {}).get("ms"))
            + " ms: what would bring the five slowest under 2 s is a record per rank of each "
            "spread, which costs the ruler about what the straggler family's per-rank mean "
            f"costs it ({fmt_ms(mean)} ms per evaluation at {N:,} ranks) for each of them, "
            f"against {fmt_ms(3000 - total)} ms left of the ruler's 3 s; see the next point.")


def _panel_before_after(size: dict, panel: str) -> str:
    b, a = panels_of(size, "before").get(panel), panels_of(size).get(panel)
    name = panel.split(" / ", 1)[-1]
    if not b or not a or not a["ms"]:
        return f"{name} not measured"
    return f"{name} {fmt_ms(b['ms'])} -> {fmt_ms(a['ms'])} ms ({b['ms'] / a['ms']:.1f}x)"


def _samples_before_after(size: dict, groups) -> str:
    out = []
    for g in groups:
        b, a = size["groups"].get("before:" + g), size["groups"].get(g)
        if b and a:
            out.append(f"{g.removeprefix('obsgen-')} {b['samples']:,} -> {a['samples']:,}")
    return ", ".join(out) or "not measured"


def before_after(ss: list[dict]) -> list[str]:
    big = ss[-1]
    N = big["ranks"]
    out = ["## Before and after (same data, same run)", "",
           "`before` is each rule group this benchmark changed, as main rendered it before "
           "(`benchmarks/baseline/rules.yaml`), measured on the same TSDB in the same run as "
           "the current rules (`after`). A family's before and after are its group and its "
           "facts group, in ruler time per 30 s (a group every 2m counts a quarter, every 1m "
           "half); its rules are listed at their time per evaluation, the facts marked.", "",
           f"| rule group | before ms at {N:,} | after ms at {N:,} | before / after |",
           "|---|---:|---:|---:|"]
    families = dict.fromkeys(family(g.removeprefix("before:")) for g in sorted(suite(big, "before")))
    for fam in families:
        g = f"obsgen-{fam}"
        before, after = before_groups(big, g), after_groups(big, g)
        if not after:
            continue
        b_ms = sum(per_evaluation(v) for v in before.values())
        a_ms = sum(per_evaluation(v) for v in after.values())
        out.append(f"| {g} | {fmt_ms(b_ms)} | {fmt_ms(a_ms)} | {b_ms / a_ms:.2f} |")
        was = {r: (ms, k.endswith("-facts")) for k, v in before.items() for r, ms in v["rules"].items()}
        now = {r: (ms, k.endswith("-facts")) for k, v in after.items() for r, ms in v["rules"].items()}
        for r in sorted(set(was) | set(now)):
            (b, b_fact), (a, a_fact) = was.get(r, (None, False)), now.get(r, (None, False))
            out.append(f"| &nbsp; `{r}`{' (facts)' if a_fact or b_fact else ''} | {fmt_ms(b)} "
                       f"| {fmt_ms(a)} | |")
    out.append("")
    before, after = panels_of(big, "before"), panels_of(big, "obsgen")
    if not before:
        return out
    out += [f"| panel (before > 500 ms at {N:,}) | before ms | after ms | before / after |",
            "|---|---:|---:|---:|"]
    for p, v in sorted(before.items(), key=lambda kv: -kv[1]["ms"]):
        if v["ms"] < 500:
            continue
        a = after.get(p)
        out.append(f"| {p} | {fmt_ms(v['ms'])} | {fmt_ms(a['ms']) if a else 'removed'} | "
                   f"{v['ms'] / a['ms']:.1f} |" if a and a["ms"] else
                   f"| {p} | {fmt_ms(v['ms'])} | {fmt_ms(a['ms']) if a else 'removed'} | |")
    out += ["", f"Slowest panel before: {max(before.items(), key=lambda kv: kv[1]['ms'])[0]}, "
            f"{fmt_ms(max(v['ms'] for v in before.values()))} ms; after: "
            f"{slowest_panel(big)[0]}, {fmt_ms(slowest_panel(big)[1]['ms'])} ms.", ""]
    return out

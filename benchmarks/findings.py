"""The prose of RESULTS.md: what the numbers say, what changed with its before/after on
the same data, what was tried and not kept, and the run without the unread buckets."""
from __future__ import annotations

from .measures import (GROUP_TARGET_MS, PANEL_TARGET_MS, RECORDS, family, fmt_mib, fmt_ms,
                       panels_of, per_evaluation, per_series_us, slowest_panel, suite, total_ms,
                       with_records)

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
           "- `dashboards.records` (new config key, off by default): the spreads across ranks "
           "and GPUs and the job's GPU and fabric totals that the slowest panels computed from "
           "raw series at each of 121 steps are recorded by a new family, `panels` "
           "(a group per view, `obsgen-panels-tp` and so on, side by side, every 5m, "
           "`family_intervals.panels`), and the panels read the "
           "records: per rank for the spreads, so the rank variable still selects; per job for "
           "the totals. " + _records(big) + " The records cost the ruler on every evaluation "
           "whether anyone looks or not, and an evaluation reads every series once, which "
           "costs about what ten steps of a range query do, so recorded every 30 s they would "
           "cost what ten refreshes an hour of the panels do. " + _break_even(big) + " It is "
           "off by default because on small jobs the raw queries are cheap and show 30 s "
           "steps where the records show 5m ones.",
           "- The straggler flag reads each rank's newest busy mean (`last_over_time` over one "
           "and a half of the family's interval) and keeps the ranks scraped now with one "
           "join of the compute count, after the threshold, instead of joining every rank's "
           "mean with its compute count three times: its baseline is still computed from the "
           "same read of the means, so a remote ruler's late or ended records change no "
           "alert, and benchmarks/DETECTION.md is unchanged. Before / after in ruler time per "
           "30 s (the same rules): "
           + "; ".join(_before_after_ratio(s, ("obsgen-stragglers",)) for s in ss) + ".",
           "- Panels over every host's or rank's raw series in the cluster (ECC and NVLink "
           "errors per host, clock reasons, NCCL link recoveries per rank, bytes per parallel "
           "group, the IB line rate) are queried at a 1m min interval (Grafana's query "
           "option): 61 points an hour instead of 121, at about half the cost. Before / after "
           "at " + f"{N:,}" + " ranks, default config: "
           + "; ".join(_panel_before_after(big, p) for p in sorted(panels_of(big, "before"))) + ".",
           "- Earlier changes, measured in earlier runs (`git log benchmarks/RESULTS.md`), at "
           "16,384 ranks unless said: families whose alerts wait on windows of 10 minutes or "
           "more evaluated at about a fifteenth of the shortest window or `for` "
           "(`family_intervals`: pipeline, fabric, nccl every 1m, checkpoints and recovery "
           "every 2m; checkpoints 3.09x, recovery 4.25x, nccl 2.08x in ruler time per 30 s); "
           "the NCCL sidecar's collective series labelled with the rank's host, so the "
           "all-reduce hosts aggregate by it instead of joining every rank's newest "
           "`train_world_size` (399 -> 205 ms per evaluation; fabric family 2.82x); the bubble "
           "as the ratio of the stage's sums instead of a per-rank busy record (437 -> 295 ms; "
           "pipeline 2.65x) and the ranks progressing counted from the raw counts in one rule "
           "(133 -> 86 ms; ranks 1.13x); five panels reading records the alerts compute "
           "instead of every rank's, GPU's or port's raw series (checkpoint interval "
           "11,380 -> 14 ms, duration per checkpoint 5,409 -> 3 ms, write throughput "
           "2,562 -> 5 ms, InfiniBand transmit of the job's hosts 11,926 -> 124 ms, SM-active "
           "spread within a host 5,387 -> 34 ms); job facts (world size, planned steps, pipeline shape, "
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
           "sparse per-GPU event records (1.38x at 4,096 ranks), then every 1m "
           "(`family_intervals.gpus`; dcgm-exporter samples every 30 s, its ECC and XID "
           "alerts hold for an hour; 1.46x at 16,384 ranks); the straggler family every 1m "
           "(`family_intervals.stragglers`) with a `for` of 1m instead of every 30 s with "
           "1m30s, a straggler named as soon as before (1.96x).",
           "- The mesh-aware straggler family (issue 18: busy time, the stage baseline with "
           "its slowest rank left out, the TP lockstep and the mesh patterns) first cost "
           "2.2x less than the naive rule at 1,024 ranks, against 5.5x before it: the "
           "pattern records read every rank's mesh info six times per evaluation, the "
           "lockstep record every rank's wait counter, and the alert and the Transient "
           "count every rank's ratio. Measured on a kept 1,024-rank TSDB (ms per "
           "evaluation): the family's group 303 -> 127 and the late-arrival group 268 -> 128, "
           "with the mesh as facts every `facts_interval` (each rank's place, 50 ms, and the "
           "ranks per position of a stage, 29 ms, every 2m), the flags valued as their ratio "
           "so that the alerts read the few flagged ranks, the per-rank ratio moved to the "
           "panels family (the overview computes it otherwise), and Transient's recovered "
           "ranks checked against their stage instead of every rank. What is left is the "
           "busy time itself: four reads of every rank's raw series (compute, its wait, the "
           "step count, and the count now, which keeps a lost rank's or an old stage's rate "
           "window out of the baseline), about 60% of the group.",
           "- What is left: " + _left(big),
           "- Tried and not merged: a recording-rule family that pre-aggregates every "
           "dashboard panel per job (on the code before issue 9, a local experiment not kept "
           "in the repository). Measured once at 4,096 ranks on this machine, on the "
           "same kind of data: the slowest panel fell from 18,336 ms (NVLink throughput per "
           "GPU) to 343 ms, but the family cost 8,651 ms per evaluation, 3.8x all alerting "
           "groups together (2,288 ms), every 30 s whether anyone looks or not. Moving "
           "per-rank work from the panels into the ruler does not remove it; at 16,384 ranks "
           "it would not fit a 30 s interval on this machine. Worth it only for a few panels "
           "that are open all the time, in a group with a longer interval: which is what "
           "`dashboards.records` is, opt-in.",
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


def _records(size: dict) -> str:
    """The panels family at ``size``: its cost and what it does to the slowest panels."""
    rec = suite(size, RECORDS)
    if not rec:
        return "(Not measured in this run.)"
    default, recorded = panels_of(size), panels_of(size, RECORDS)
    slowest_group = max(rec.items(), key=lambda kv: kv[1]["ms"])
    worst = max(recorded, key=lambda p: default[p]["ms"])
    slowest = max(with_records(size).items(), key=lambda kv: kv[1]["ms"])
    return (f"At {size['ranks']:,} ranks the slowest of them, {worst.split(' / ', 1)[-1]}, "
            f"falls from {fmt_ms(default[worst]['ms'])} to {fmt_ms(recorded[worst]['ms'])} ms, "
            f"and the slowest panel of all with the records is {slowest[0]} at "
            f"{fmt_ms(slowest[1]['ms'])} ms; its {len(rec)} groups cost "
            f"{fmt_ms(sum(v['ms'] for v in rec.values()))} ms per evaluation together (the "
            f"slowest, {slowest_group[0]}, {fmt_ms(slowest_group[1]['ms'])} ms), "
            f"{fmt_ms(total_ms(size, RECORDS))} ms per 30 s, so the ruler's total "
            f"becomes {fmt_ms(total_ms(size, 'obsgen') + total_ms(size, RECORDS))} ms per 30 s "
            "(the table \"dashboards.records\" above).")


def _break_even(size: dict) -> str:
    """The panels family's CPU per hour against one look at its panels without it."""
    rec = suite(size, RECORDS)
    if not rec:
        return ""
    per_hour = sum(v["ms"] * 3600 / v["interval"] for v in rec.values()) / 1000
    look = sum(panels_of(size)[p]["ms"] for p in panels_of(size, RECORDS)) / 1000
    return (f"Every 5m they cost the ruler {per_hour:,.0f} s of CPU an hour at "
            f"{size['ranks']:,} ranks, while drawing these panels once without them costs "
            f"{look:,.0f} s: on a large job they pay for themselves as soon as someone opens "
            "the dashboards.")


def _left(size: dict) -> str:
    """What the targets still miss, and the levers not taken."""
    N = size["ranks"]
    total = total_ms(size, "obsgen")
    rec = suite(size, RECORDS)
    cost = max(v["ms"] for v in rec.values()) if rec else None
    ruler = (f"the default groups cost {fmt_ms(total)} ms per 30 s at {N:,} ranks "
             f"({'under' if total < 3000 else 'over'} the 3 s target), and with the default "
             "config the spreads across ranks and GPUs still take seconds to draw over 1 h. ")
    return (ruler + "No rewrite of their queries closes it: a range query pays, at each of "
            "its 121 steps, for every series' label set in every aggregation and binary "
            "operator, not for samples (measured at 4,096 ranks on a kept TSDB, for `TP / Time "
            "inside TP collectives across ranks`: the rate alone 194 ms, summed per rank 693 "
            "ms, the per-rank mean and its max 2,121 ms). `dashboards.records` closes it for "
            "large jobs, at the price above; its slowest group "
            + (f"takes {fmt_ms(cost)} ms per evaluation at {N:,} ranks" if cost else "was not measured")
            + ". One lever is not taken: a config naming the platform would let the SM-active "
            "spread read dcgm-exporter once instead of twice (it computes the Kubernetes pod "
            "map and the bare-metal host map and keeps the better per host; measured at 4,096 "
            "ranks, 107 ms for both, 57 for the pod map alone).")


def _panel_before_after(size: dict, panel: str) -> str:
    b, a = panels_of(size, "before").get(panel), panels_of(size).get(panel)
    name = panel.split(" / ", 1)[-1]
    if not b or not a or not a["ms"]:
        return f"{name} not measured"
    return f"{name} {fmt_ms(b['ms'])} -> {fmt_ms(a['ms'])} ms ({b['ms'] / a['ms']:.1f}x)"


def before_after(ss: list[dict]) -> list[str]:
    big = ss[-1]
    N = big["ranks"]
    out = ["## Before and after (same data, same run)", ""]
    if not suite(big, "before"):
        out += ["No rule group of the defaults changed in this run (`benchmarks/baseline/` "
                "holds no rules); the panels that did:", ""]
    else:
        out += _rules_before_after_table(big)
    return out + _panels_before_after_table(big)


def _rules_before_after_table(big: dict) -> list[str]:
    N = big["ranks"]
    out = ["`before` is each rule group this benchmark changed, as main rendered it before "
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
    return out


def _panels_before_after_table(big: dict) -> list[str]:
    N = big["ranks"]
    before, after = panels_of(big, "before"), panels_of(big, "obsgen")
    if not before:
        return []
    out = [f"| panel (before > 500 ms at {N:,}) | before ms | after ms | before / after |",
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

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
           "- Job facts re-read every 30 s: world size, planned steps, pipeline stages and "
           "microbatches, the deadline, the hosts and the GPUs a job runs on change only when "
           "it starts, but every evaluation read them from every rank (or GPU): at 16,384 ranks "
           "611 of the 4,602 ms the groups cost per evaluation in the previous run, the GPU "
           "map (`job_gpu:kube_pod_gpu:info`, a join of every GPU with every pod) 322 of them. "
           "They are now recorded by a facts group of their family, `obsgen-<family>-facts`, "
           "every `facts_interval` (2m; null restores one group per family): what the alerts "
           "read from them is at most 2 minutes old, against fors and windows of 15 minutes "
           "to an hour. The deadline became a record too (`Train_ETA_Slip` and the overview "
           "read it instead of every rank's gauge). Before / after in ruler time per 30 s: "
           "gpus " + "; ".join(_before_after_ratio(s, ("obsgen-gpus",)) for s in ss)
           + "; ranks " + "; ".join(_before_after_ratio(s, ("obsgen-ranks",)) for s in ss)
           + "; pipeline " + "; ".join(_before_after_ratio(s, ("obsgen-pipeline",)) for s in ss)
           + "; progress " + "; ".join(_before_after_ratio(s, ("obsgen-progress",)) for s in ss)
           + ".",
           "- A 0 for every rank that is not straggling: the straggler flag was recorded as "
           "0 or 1 for every rank every 30 s, so the share read 30 minutes of every rank's "
           "flag, and the transient count and Persistent every rank's share, for the few "
           "ranks that straggle. The flag is now recorded only while a rank straggles (the "
           "ruler writes a stale marker when it stops); the share counts its samples over the "
           "stage's evaluations, the same number for every rank that straggled and no series "
           "for the others (the fixtures pass unchanged). Straggler family before / after: "
           + "; ".join(_before_after_ratio(s) for s in ss) + ".",
           "- Panels that relabel before they aggregate: the hardware view copied "
           "dcgm-exporter's `Hostname` into `node` on every GPU (node_exporter's `nodename` on "
           "every port) and then aggregated per host; `label_replace` builds a label set per "
           "series and step, so relabelling 8 GPUs per host cost most of the query. They now "
           "aggregate per host under the exporter's own label and relabel the host. The clock "
           "reasons were tested as `floor(x / bit) % 2 == 1`, four operations on every GPU at "
           "every step; `(x >= bit) % (2 * bit) >= bit` drops the GPUs below the bit first "
           "(most GPUs, at full clocks). Before / after at " + f"{N:,}" + " ranks: "
           + "; ".join(_panel_before_after(big, p) for p in (
               "Training · Hardware / GPUs held below full clocks, by reason",
               "Training · Hardware / Hottest GPU per host",
               "Training · Hardware / ECC errors per host",
               "Training · DP / InfiniBand transmit of the job's hosts")) + ".",
           "- The late-arrival family (`obsgen-nccl`) read 15 minutes of two counters per "
           "rank and collective (op, group), 12 series per rank here, and joined every rank's "
           "`nccl_communicator_ranks` to name the host: the costliest group per rank. Samples "
           "were not what it spent (at 1,024 ranks `increase(...[15m])` over those counters "
           "cost 29 ms, `increase(...[5m])` 24 ms, the bare selector 20 ms: a 5-minute ratio "
           "with the persistence in `for:` would have saved a sixth); series were. The "
           "sidecar now counts aligned collectives and last arrivals per (rank, group), every "
           "op of the group together (no rule or panel read them by op), and names the host "
           "of the rank's records on them, so the ratio carries the node and the alert needs "
           "no join: 4 series per rank instead of 12 plus 3 (send/recv are not aligned). The "
           "`before` group reads the counters as the sidecar published them before, written "
           "beside the new ones for it alone (`before_*`, not counted in any series number). "
           "Late-arrival family before / after: "
           + "; ".join(_before_after_ratio(s, ("obsgen-nccl",)) for s in ss) + ".",
           "- Earlier changes, measured in earlier runs (`git log benchmarks/RESULTS.md`): the "
           "straggler records keep the `node` label every series of `obsgen.instrument` "
           "carries, so `Train_Straggler_Persistent` and the overview's top-N table no longer "
           "join every rank's newest `train_world_size` to name the host (straggler family "
           "1.20x at 16,384 ranks); the ETA from the ranks family's job records instead of "
           "four reads of every rank's series (progress 6.21x at 16,384 ranks); the "
           "straggler flag window read once per evaluation (`share30m`); `obsgen-checkpoints` "
           "and `obsgen-recovery` from job-level records of the rate window instead of an "
           "hour of every rank's counters (1.87x at 4,096 ranks); `obsgen-gpus` from sparse "
           "per-GPU event records (1.38x at 4,096 ranks).",
           "- What is left of the targets: the groups cost " + f"{fmt_ms(total_ms(big, 'obsgen'))}"
           + " ms per 30 s at " + f"{N:,}" + " ranks against 3 s. Most of it is rules that read "
           "every rank's raw series once, each needed (the slowest rules above). Levers not "
           "taken, each a trade: a config naming the platform would let the SM-active spread "
           "read dcgm-exporter once instead of twice (it computes the Kubernetes pod map and "
           "the bare-metal host map and keeps the better per host); the NCCL sidecar could "
           "label its collective histograms with the rank's host, as it does its alignment "
           "counters, so the all-reduce hosts need no join over every rank for the node. The "
           "five slowest panels are spreads across ranks or GPUs (slowest, median and fastest "
           "of a mean over every rank's raw histograms, or of every GPU's gauge, at each of "
           "121 steps); the spread that "
           "reads a per-rank record, `Overview / Compute time across ranks`, takes "
           + fmt_ms(panels_of(big).get("Training · Overview / Compute time across ranks", {}).get("ms"))
           + " ms. A record per rank for each spread would cost the ruler about what the "
           "straggler family's mean costs it (320 ms per 30 s at 16,384 ranks) for each of "
           "the five, which the ruler target cannot afford; see the next point.",
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


def _before_after_ratio(size: dict, groups=("obsgen-stragglers",)) -> str:
    """Before over after, in ruler time per 30 s (a facts group counts a quarter)."""
    b = [size["groups"].get("before:" + g) for g in groups]
    a = [after_groups(size, g) for g in groups]
    if not all(b) or not all(a):
        return f"not measured at {size['ranks']:,} ranks"
    ratio = (sum(per_evaluation(x) for x in b)
             / sum(per_evaluation(v) for x in a for v in x.values()))
    return f"{ratio:.2f} at {size['ranks']:,} ranks"


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
           "the current rules (`after`). A family's after is its group and its facts group, "
           "in ruler time per 30 s (the facts group, every 2m, counts a quarter); its rules "
           "are listed at their time per evaluation, the facts marked.", "",
           f"| rule group | before ms at {N:,} | after ms at {N:,} | before / after |",
           "|---|---:|---:|---:|"]
    for bg, b in sorted(suite(big, "before").items()):
        g = bg.removeprefix("before:")
        after = after_groups(big, g)
        if not after:
            continue
        a_ms = sum(per_evaluation(v) for v in after.values())
        out.append(f"| {g} | {fmt_ms(per_evaluation(b))} | {fmt_ms(a_ms)} | {per_evaluation(b) / a_ms:.2f} |")
        now = {r: (ms, k.endswith("-facts")) for k, v in after.items() for r, ms in v["rules"].items()}
        for r in sorted(set(b["rules"]) | set(now)):
            ms, fact = now.get(r, (None, False))
            out.append(f"| &nbsp; `{r}`{' (facts)' if fact else ''} | {fmt_ms(b['rules'].get(r))} "
                       f"| {fmt_ms(ms)} | |")
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

"""RESULTS.md and the cost-vs-ranks plot from the scale benchmark's results JSON.

Every number in RESULTS.md comes from ``benchmarks/results.json``; ``python -m
benchmarks.scale --report`` rewrites both outputs from it without measuring again.
"""
from __future__ import annotations

import json
import math
import os
import platform
import subprocess
from pathlib import Path

GROUP_TARGET_MS = 1000  # every rule group, at the largest size
SUITE_TARGET_MS = 3000  # all groups together: 10% of a 30 s evaluation interval
PANEL_TARGET_MS = 2000  # every panel over 1 h
STRAGGLER_TARGET = 5.0  # naive straggler rule / obsgen straggler family


def machine() -> dict:
    def first_line(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
        except (OSError, IndexError):
            return "?"
    mem = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) * 1024
    return {"cpus": os.cpu_count(), "memory_bytes": mem, "python": platform.python_version(),
            "prometheus": first_line(["prometheus", "--version"]),
            "load_before": os.getloadavg()[0]}


def _naive_families() -> set[str]:
    from . import naive

    return set(naive.FAMILY.values())


def sizes(results: dict) -> list[dict]:
    return [results["sizes"][k] for k in sorted(results["sizes"], key=int)]


def suite(size: dict, name: str) -> dict:
    return {g: v for g, v in size["groups"].items() if v["suite"] == name}


def family(group: str) -> str:
    """The family of a group: obsgen-gpus and obsgen-gpus-facts are both gpus."""
    return group.split("-", 1)[1].removesuffix("-facts")


EVALUATION = 30  # s: the interval every group but the facts groups is evaluated at


def per_evaluation(v: dict) -> float:
    """A group's ruler time per 30 s evaluation interval: its evaluation time, scaled by
    how often it is evaluated (a facts group every 2m costs a quarter of its time)."""
    return v["ms"] * EVALUATION / v.get("interval", EVALUATION)


def total_ms(size: dict, name: str) -> float:
    """What the suite's groups cost the ruler per 30 s (see per_evaluation)."""
    return sum(per_evaluation(v) for v in suite(size, name).values())


def once_ms(size: dict, name: str) -> float:
    """Every group of the suite evaluated once, whatever its interval."""
    return sum(v["ms"] for v in suite(size, name).values())


def panels_of(size: dict, name: str = "obsgen") -> dict:
    return size["panels"].get(name, {})


def slowest_panel(size: dict, name: str = "obsgen") -> tuple[str, dict]:
    return max(panels_of(size, name).items(), key=lambda kv: kv[1]["ms"])


def errors(results: dict) -> list[str]:
    out = []
    for size in sizes(results):
        for g, v in size["groups"].items():
            out += [f"{size['ranks']} ranks, {g}: {e}" for e in v["errors"]]
        for s, ps in size["panels"].items():
            for p, v in ps.items():
                out += [f"{size['ranks']} ranks, {s} panel {p}: {e}" for e in v["errors"]]
    return out


def _rounds(size: dict) -> str:
    # sizes measured before the rounds were recorded ran the default: 2 and 2
    r = size["built"].get("rounds", {"rules": 2, "panels": 2})
    return f"{r['rules']}, {r['panels']}"


def _ms(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}" if x >= 1 else f"{x:.2f}"


def _mib(b: int) -> str:
    return f"{b / 2**20:,.0f}"


def _growth(a: float, b: float, na: int, nb: int) -> str:
    """Exponent k of cost ~ N^k between two sizes (1 = linear)."""
    if not a or not b or a <= 0 or b <= 0 or na == nb:
        return "-"
    return f"{math.log(b / a) / math.log(nb / na):.2f}"


def summary(results: dict) -> str:
    """A few lines per size for the terminal."""
    lines = []
    for size in sizes(results):
        n = size["ranks"]
        og, nv = total_ms(size, "obsgen"), total_ms(size, "naive")
        sp = slowest_panel(size)
        strag = size["groups"]["naive-stragglers"]["ms"] / size["groups"]["obsgen-stragglers"]["ms"]
        lines.append(f"{n} ranks, {size['counts']['all']:,.0f} series: obsgen rules {og:.1f} ms, "
                     f"naive {nv:.1f} ms (naive/obsgen {nv / og:.2f}), stragglers {strag:.1f}x "
                     f"cheaper, slowest panel {sp[1]['ms']:.1f} ms ({sp[0]})")
        for g, v in sorted(size["groups"].items()):
            lines.append(f"  {g:26s} {v['ms']:10.1f} ms {v['samples']:>14,.0f} samples")
    lines += ["ERROR " + e for e in errors(results)]
    return "\n".join(lines)


def markdown(results: dict) -> str:
    ss = sizes(results)
    big, small = ss[-1], ss[0]
    N = big["ranks"]
    m = results["machine"]
    has_before = any(v["suite"] == "before" for v in big["groups"].values())
    out = ["# Scale benchmark: obsgen's rules and dashboards at "
           + ", ".join(f"{s['ranks']:,}" for s in ss) + " ranks", "",
           "Written by `make bench` (`python -m benchmarks.scale`; `--report` rewrites this file "
           "and `scale.png` from `results.json`). Do not edit by hand.", "",
           f"Machine: {m['cpus']} cores, {m['memory_bytes'] / 2**30:.0f} GiB, shared with other "
           f"developers' test runs (load average {m.get('load_before', 0):.1f} when the run "
           f"started); {m['prometheus']}; Python {m['python']}. The run took "
           f"{results.get('elapsed_seconds', 0) / 60:.0f} minutes.", "",
           *results.get("notes", [])]

    # targets ------------------------------------------------------------------------
    og = suite(big, "obsgen")
    worst_group = max(og.items(), key=lambda kv: kv[1]["ms"])
    all_groups = total_ms(big, "obsgen")
    sp = slowest_panel(big)
    strag = big["groups"]["naive-stragglers"]["ms"] / big["groups"]["obsgen-stragglers"]["ms"]
    whole = total_ms(big, "naive") / all_groups
    like = [g for g in og if family(g) in _naive_families()]
    like_ms = sum(per_evaluation(og[g]) for g in like)
    growth = {g: _growth(small["groups"][g]["ms"], big["groups"][g]["ms"], small["ranks"], N)
              for g in og}
    worst_growth = max(growth.items(), key=lambda kv: float(kv[1]) if kv[1] != "-" else 0)
    yes = lambda ok: "met" if ok else "**missed**"
    out += ["## Targets", "",
            f"| target (at {N:,} ranks) | measured | |", "|---|---|---|",
            f"| every rule group < 1 s | slowest: {worst_group[0]}, {_ms(worst_group[1]['ms'])} ms "
            f"| {yes(worst_group[1]['ms'] < GROUP_TARGET_MS)} |",
            f"| all groups together < 3 s | {_ms(all_groups)} ms per 30 s (every group once: "
            f"{_ms(once_ms(big, 'obsgen'))} ms; the facts groups run every 2m) "
            f"| {yes(all_groups < SUITE_TARGET_MS)} |",
            f"| every panel over 1 h < 2 s | slowest: {sp[0]}, {_ms(sp[1]['ms'])} ms "
            f"| {yes(sp[1]['ms'] < PANEL_TARGET_MS)} |",
            f"| straggler family >= 5x cheaper than the naive straggler rule | {strag:.2f}x "
            f"| {yes(strag >= STRAGGLER_TARGET)} |",
            f"| whole suite no more costly than the naive suite | naive / obsgen = {whole:.2f} "
            f"(the {len({family(g) for g in like})} families that replace the document's rules "
            f"alone: {total_ms(big, 'naive') / like_ms:.2f}; the other "
            f"{len({family(g) for g in og} - {family(g) for g in like})} check what "
            f"the document does not: {_ms(all_groups - like_ms)} ms; ruler time per 30 s) "
            f"| {yes(whole >= 1)} |",
            f"| cost linear in N | largest growth exponent {small['ranks']:,} -> {N:,}: "
            f"{worst_growth[1]} ({worst_growth[0]}); 1 = linear, 2 = quadratic "
            f"| {yes(float(worst_growth[1]) < 1.3 if worst_growth[1] != '-' else True)} |", ""]

    # per size -------------------------------------------------------------------------
    out += ["## Per size", "",
            "Rule times are Prometheus' own evaluation time (`evalTotalTime` from `stats=all`: "
            "what the ruler spends in the engine, without HTTP or JSON), per group the median "
            "over 5 evaluation times x timed rounds of the sum of its rules (one untimed warm-up "
            "round first; the timed rounds of each size are in the last column). Panel times are per "
            "panel the sum of its queries' medians (Grafana sends them together; the sum is the "
            "cost on one core). RSS is the peak resident set (`VmHWM`) of a fresh Prometheus "
            "that evaluated one suite's rules at the 5 times; in brackets, of the process that "
            "ran every suite and every panel, repeatedly.", "",
            "| ranks | series in TSDB | per rank | obsgen: all groups, ms per 30 s | slowest group ms "
            "| naive suite ms | naive / obsgen | naive / obsgen stragglers "
            "| slowest panel ms | peak RSS MiB: obsgen rules (all) / naive rules "
            "| timed rounds: rules, panels |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in ss:
        o, nv = total_ms(s, "obsgen"), total_ms(s, "naive")
        wg = max(suite(s, "obsgen").values(), key=lambda v: v["ms"])
        st = s["groups"]["naive-stragglers"]["ms"] / s["groups"]["obsgen-stragglers"]["ms"]
        mem = s["memory"]
        out.append(f"| {s['ranks']:,} | {s['counts']['all']:,.0f} | {s['counts']['all'] / s['ranks']:.0f} "
                   f"| {_ms(o)} | {_ms(wg['ms'])} | {_ms(nv)} | {nv / o:.2f} | {st:.1f} "
                   f"| {_ms(slowest_panel(s)[1]['ms'])} | {_mib(mem['obsgen']['rules_peak_rss'])} "
                   f"({_mib(mem['obsgen']['panels_peak_rss'])}) / {_mib(mem['naive']['rules_peak_rss'])} "
                   f"| {_rounds(s)} |")
    out.append("")

    # groups ---------------------------------------------------------------------------
    out += ["## Rule groups", "",
            "Evaluation ms per group at each size; samples read per evaluation at the largest "
            "size (Prometheus' `totalQueryableSamples`, which does not change with load: 2.42 "
            "counts a subquery's inner samples only partly, so the naive straggler rule's count "
            "is low); growth exponent k of cost ~ N^k from the smallest to the largest size. "
            "A facts group (job shape and placement, `facts_interval`) is evaluated every 2m: "
            "its time counts a quarter in the totals per 30 s.", "",
            "| group | " + " | ".join(f"{s['ranks']:,}" for s in ss)
            + f" | samples at {N:,} | k | naive rule at {N:,} | naive / obsgen |",
            "|---|" + "---:|" * (len(ss) + 4)]
    for g in sorted(og):
        nv = None if g.endswith("-facts") else big["groups"].get(f"naive-{family(g)}")
        every = og[g].get("interval", EVALUATION)
        name = g if every == EVALUATION else f"{g} (every {every / 60:g}m)"
        row = [name] + [_ms(s["groups"][g]["ms"]) for s in ss] + [
            f"{big['groups'][g]['samples']:,.0f}", growth[g],
            _ms(nv["ms"]) if nv else "-", f"{nv['ms'] / og[g]['ms']:.1f}" if nv else "-"]
        out.append("| " + " | ".join(row) + " |")
    row = ["**all obsgen groups, per 30 s**"] + [_ms(total_ms(s, "obsgen")) for s in ss] + [
        f"{sum(v['samples'] for v in og.values()):,.0f}",
        _growth(total_ms(small, "obsgen"), all_groups, small["ranks"], N),
        _ms(total_ms(big, "naive")), f"{whole:.2f}"]
    out += ["| " + " | ".join(row) + " |", ""]
    out += [f"Slowest rules at {N:,} ranks (median ms per evaluation):", ""]
    rules = sorted(((v["rules"][r], g, r) for g, v in og.items() for r in v["rules"]), reverse=True)
    out += ["| rule | group | ms |", "|---|---|---:|"]
    out += [f"| `{r}` | {g} | {_ms(ms)} |" for ms, g, r in rules[:8]]
    out += ["", "The naive suite (each rule is its own group, named after the obsgen family that "
            "replaces it):", "", "| naive group | " + " | ".join(f"{s['ranks']:,}" for s in ss) + " |",
            "|---|" + "---:|" * len(ss)]
    for g in sorted(suite(big, "naive")):
        out.append(f"| {g} | " + " | ".join(_ms(s["groups"][g]["ms"]) for s in ss) + " |")
    out.append("")

    # before/after ---------------------------------------------------------------------
    if has_before:
        out += before_after(ss)

    # panels ---------------------------------------------------------------------------
    out += ["## Dashboard panels over 1 h", "",
            "Every panel of every dashboard, ms (sum of its queries), slowest first at the "
            f"largest size. A dash: the benchmark job (dense TP x PP x DP) has no series the "
            "panel reads (FSDP and EP groups, experts); those queries have the same shape as "
            "their DP and TP counterparts.", "",
            "| panel | queries | " + " | ".join(f"{s['ranks']:,}" for s in ss) + f" | samples at {N:,} |",
            "|---|---:|" + "---:|" * (len(ss) + 1)]
    for p, v in sorted(panels_of(big).items(), key=lambda kv: -kv[1]["ms"]):
        cells = [_ms(s["panels"]["obsgen"][p]["ms"]) if s["panels"]["obsgen"][p]["samples"] else "-"
                 for s in ss]
        out.append(f"| {p} | {v['queries']} | " + " | ".join(cells) + f" | {v['samples']:,} |")
    out.append("")

    out += findings(ss)
    out += drop_buckets_finding(ss, results.get("drop_buckets"), results.get("rules_sha"))
    # series ---------------------------------------------------------------------------
    out += series_section(big)
    out += method_section(results, big)
    return "\n".join(out) + "\n"


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
           f"selector costs {_per_series_us(big) or 0:.0f} µs per series here (blocks on disk, "
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
           "- What is left of the targets: the groups cost " + f"{_ms(total_ms(big, 'obsgen'))}"
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
           + _ms(panels_of(big).get("Training · Overview / Compute time across ranks", {}).get("ms"))
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
                        f"{_mib(s['memory']['obsgen']['panels_peak_rss'])} / "
                        f"{_mib(o['memory']['obsgen']['panels_peak_rss'])} | "
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
            f"{o['counts']['all'] / o['ranks']:.0f} | {_ms(a)} / {_ms(b)} ({a / b:.2f}) | "
            f"{_ms(pa)} / {_ms(pb)} ({pa / pb:.2f}) | {_mib(ma['rules_peak_rss'])} / "
            f"{_mib(mb['rules_peak_rss'])} | {_mib(ma['panels_peak_rss'])} / "
            f"{_mib(mb['panels_peak_rss'])} | {s['built']['tsdb_bytes'] / 2**30:.2f} / "
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
    return f"{name} {_ms(b['ms'])} -> {_ms(a['ms'])} ms ({b['ms'] / a['ms']:.1f}x)"


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
        out.append(f"| {g} | {_ms(per_evaluation(b))} | {_ms(a_ms)} | {per_evaluation(b) / a_ms:.2f} |")
        now = {r: (ms, k.endswith("-facts")) for k, v in after.items() for r, ms in v["rules"].items()}
        for r in sorted(set(b["rules"]) | set(now)):
            ms, fact = now.get(r, (None, False))
            out.append(f"| &nbsp; `{r}`{' (facts)' if fact else ''} | {_ms(b['rules'].get(r))} "
                       f"| {_ms(ms)} | |")
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
        out.append(f"| {p} | {_ms(v['ms'])} | {_ms(a['ms']) if a else 'removed'} | "
                   f"{v['ms'] / a['ms']:.1f} |" if a and a["ms"] else
                   f"| {p} | {_ms(v['ms'])} | {_ms(a['ms']) if a else 'removed'} | |")
    out += ["", f"Slowest panel before: {max(before.items(), key=lambda kv: kv[1]['ms'])[0]}, "
            f"{_ms(max(v['ms'] for v in before.values()))} ms; after: "
            f"{slowest_panel(big)[0]}, {_ms(slowest_panel(big)[1]['ms'])} ms.", ""]
    return out


def series_section(big: dict) -> list[str]:
    per = big["series_per_rank"]
    emitters = big["emitters"]
    out = ["## Series per rank", "",
           f"What one rank of the benchmark job publishes (TP={big['shape']['tp']}, "
           f"PP={big['shape']['pp']}, DP=ranks/{big['shape']['tp'] * big['shape']['pp']}, 8 GPUs "
           "per host; host series count 1/8 per rank). The training process's count is what "
           "`obsgen plan` computes for the same shape (a test checks they agree).", "",
           "| emitter | series per rank |", "|---|---:|"]
    for e, n in emitters.items():
        out.append(f"| {e} | {n:g} |")
    out += ["", "| series | per rank |", "|---|---:|"]
    for name, n in per.items():
        out.append(f"| `{name}` | {n:g} |")
    out += ["", f"Recorded series in the TSDB at the end: {big['counts']['recorded']:,.0f} "
            f"({big['counts']['recorded'] / big['ranks']:.1f} per rank).", ""]
    return out


def _unread(big: dict) -> list[str]:
    """Series families of the job that no measured query reads (from the same code)."""
    from . import scale

    cfg = scale.default_config()
    rules = scale.obsgen_rules(cfg) + scale.naive_rules() + scale.before_rules()
    exprs = [r.expr for r in rules] + [scale.panel_expr(q, "x") for q in scale.panels(cfg)]
    return sorted(set(big["series_per_rank"]) - scale.read_families(exprs))


def _per_series_us(size: dict) -> float | None:
    """µs per series of a plain selector and max: `max by (job_id) (train_world_size)`."""
    ms = next((g["rules"]["job:train_world_size:max"] for g in size["groups"].values()
               if g["suite"] == "obsgen" and "job:train_world_size:max" in g["rules"]), None)
    return 1000 * ms / size["ranks"] if ms else None


def method_section(results: dict, big: dict) -> list[str]:
    b = big["built"]
    unread = _unread(big)
    per_unread = sum(big["series_per_rank"][u] for u in unread)
    us = _per_series_us(big)
    comp = b.get("compaction_seconds")
    return [
        "## How the data was made, and what was cut", "",
        "**The job.** `benchmarks/stream.py` writes one job of N ranks with `obsgen.synth`'s "
        "physics and labels (rank speeds with a 1% spread, 3% step noise, checkpoints every "
        "10 minutes taking 20 s, the scrape labels `job`/`instance`/`node` of `synth`), shaped "
        "like a dense Megatron run: TP=8 within a host, PP=16, DP=N/128, 8 GPUs and 8 HCAs per "
        "host, one pod per rank. One rank turns 20% slower 50 minutes before the end, so the "
        "straggler alert has a rank to find. Every series is on a 30 s scrape grid; histograms "
        "have prometheus_client's 15 default buckets; counters never fall (a unit test checks "
        "the OpenMetrics: promtool reads it, counters and buckets are cumulative, families "
        "contiguous, and a rank's series are what `obsgen plan` counts for the same shape).", "",
        "**History.** The job has run for 6 h 15 min. Per-rank series carry the last 72 "
        "minutes: the longest window any rule or panel reads over per-rank series is 1 h "
        "(checkpoint overhead, the panels' range), plus the 8 minutes over which evaluation "
        "times are spread and a rate window; counters start from what the job accumulated "
        "before. The gradient norm and loss (one series each, from the last rank) carry the "
        "whole 6 h 15 min, because the vanishing-gradient baseline reads 6 h. Recorded series "
        "are backfilled over the span their inputs cover, every 30 s, the facts groups' too "
        "(a live ruler writes those every 2m; a rule that reads one looks up its last sample "
        "either way).", "",
        f"**Cut, and why.** Series that no measured query reads carry only their last 10 "
        f"minutes ({per_unread:g} of {sum(big['series_per_rank'].values()):g} series per rank: "
        + ", ".join(f"`{u}`" for u in unread) + "). They are in the TSDB's index, so series "
        "counts are whole, but their samples are never read by any query timed here. Writing "
        "every bucket's full history at 16,384 ranks would have meant about 1.7x the "
        "samples; promtool parses OpenMetrics at roughly 300,000 samples per second on this "
        "machine, and the text is ~165 bytes a sample, so the job is streamed in shards of "
        "2,048 ranks, each backfilled and deleted before the next (at most two shard files "
        "on disk). Not in the data at all: `moe_expert_tokens_total` (a dense job has no "
        "experts), FSDP and EP collectives (the job does not run them: those panels are timed "
        "on no data, marked `-`), `job_recovery_seconds` and "
        "`job_checkpoint_age_at_failure_seconds` (the job never restarted), and of `ALERTS` "
        "only the firing straggler alert.", "",
        "**What the numbers are, and are not.** The data sits in compacted blocks on disk, "
        "not in the in-memory head a live Prometheus evaluates recent data from; a block "
        "costs more per series touched than the head (here a plain `max by (job_id) "
        "(train_world_size)` costs "
        + (f"{us:.1f} µs per series at {big['ranks']:,} ranks" if us else "?")
        + "). Rule times are therefore higher than a live server's on the same CPU, and the "
        "machine is shared with other developers' test runs. Ratios (obsgen against the "
        "naive suite, before against after) are measured on the same data, in the same "
        "process, in alternating rounds, and are what this benchmark asserts; absolute "
        "times are an upper bound. Peak RSS is of Prometheus serving queries from blocks; it "
        "does not include the head a scraping server holds for the same series "
        "(`obsgen plan` estimates that at ~4 KiB per active series). Prometheus 2.42 counts "
        "a subquery's inner samples only partly in `totalQueryableSamples`, so the naive "
        "straggler rule's sample count understates it.", "",
        _build_line(big, b, comp), ""]


def _build_line(big: dict, b: dict, comp: float | None) -> str:
    tail = (f"compaction {comp / 60 if comp else 0:.1f} min; TSDB "
            f"{b['tsdb_bytes'] / 2**30:.2f} GiB; measurements "
            f"{b['measure_seconds'] / 60:.1f} min.")
    return (f"At {big['ranks']:,} ranks: {b['raw']['samples']:,} samples streamed (largest "
            f"shard file {b['raw']['largest_shard_bytes'] / 2**30:.1f} GiB, deleted after "
            f"backfilling) in {b['raw']['seconds'] / 60:.1f} min; recorded series in "
            f"{b['recorded']['levels']} dependency levels in {b['recorded']['seconds'] / 60:.1f} "
            "min; " + tail)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ss = sizes(results)
    ns = [s["ranks"] for s in ss]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.5))
    for g in sorted(suite(ss[-1], "obsgen")):
        ax1.plot(ns, [s["groups"][g]["ms"] for s in ss], marker="o", label=g)
    ax1.plot(ns, [total_ms(s, "obsgen") for s in ss], marker="s", lw=2.5, color="black",
             label="obsgen: all groups, ruler ms per 30 s")
    ax1.plot(ns, [total_ms(s, "naive") for s in ss], marker="s", lw=2.5, ls="--", color="red",
             label="naive suite")
    ax1.plot(ns, [s["groups"]["naive-stragglers"]["ms"] for s in ss], marker="^", ls="--",
             color="darkred", label="naive straggler rule")
    ax1.axhline(GROUP_TARGET_MS, color="grey", ls=":", lw=1)
    ax1.axhline(SUITE_TARGET_MS, color="grey", ls="-.", lw=1)
    _linear(ax1, ns, total_ms(ss[0], "obsgen"))
    ax1.set(xscale="log", yscale="log", xlabel="ranks", ylabel="evaluation ms (median)",
            title="Rule groups: cost per evaluation")
    ax1.legend(fontsize=7)
    names = sorted(panels_of(ss[-1]), key=lambda p: -panels_of(ss[-1])[p]["ms"])[:6]
    for p in names:
        ax2.plot(ns, [s["panels"]["obsgen"][p]["ms"] for s in ss], marker="o", label=p[:60])
    if any(v["suite"] == "before" for v in ss[-1]["groups"].values()):
        for g in sorted(suite(ss[-1], "before")):
            ax1.plot(ns, [s["groups"][g]["ms"] for s in ss], marker="x", ls=":", label=g)
    ax2.axhline(PANEL_TARGET_MS, color="grey", ls=":", lw=1)
    ax2.set(xscale="log", yscale="log", xlabel="ranks", ylabel="query ms over 1 h (median)",
            title="Slowest dashboard panels")
    ax2.legend(fontsize=7)
    from matplotlib.ticker import NullFormatter

    for ax in (ax1, ax2):
        ax.set_xticks(ns, [f"{n:,}" for n in ns])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("obsgen scale benchmark (dotted: targets; thin dashed: linear in N)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _linear(ax, ns: list[int], y0: float) -> None:
    ax.plot(ns, [y0 * n / ns[0] for n in ns], color="grey", lw=0.8, ls="--")


def write(results: dict, here: Path) -> None:
    other = here / DROP_BUCKETS
    if other.exists() and "drop_buckets" not in results:
        results = {**results, "drop_buckets": json.loads(other.read_text())}
    (here / "RESULTS.md").write_text(markdown(results))
    try:
        plot(results, here / "scale.png")
    except ImportError:
        print("matplotlib missing: pip install -e '.[bench]' for the plot")

"""RESULTS.md and the cost-vs-ranks plot from the scale benchmark's results JSON.

Every number in RESULTS.md comes from ``benchmarks/results.json``; ``python -m
benchmarks.scale --report`` rewrites both outputs from it without measuring again. The
tables and the plot are here, the prose in benchmarks.findings, the arithmetic both use in
benchmarks.measures.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path

from .findings import DROP_BUCKETS, before_after, drop_buckets_finding, findings
from .measures import (EVALUATION, GROUP_TARGET_MS, PANEL_TARGET_MS, REFERENCE_NAIVE_MS,
                       STRAGGLER_TARGET, machine_factor,
                       SUITE_TARGET_MS, errors, family, fmt_mib, fmt_ms, growth_exponent,
                       naive_families, once_ms, panels_of, per_evaluation, per_series_us, sizes,
                       RECORDS, slowest_panel, straggler_ratio, suite, timed_rounds, total_ms,
                       with_records)

def yes(ok: bool) -> str:
    return "met" if ok else "**missed**"


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


def summary(results: dict) -> str:
    """A few lines per size for the terminal."""
    lines = []
    for size in sizes(results):
        n = size["ranks"]
        og, nv = total_ms(size, "obsgen"), total_ms(size, "naive")
        sp = slowest_panel(size)
        strag = straggler_ratio(size)
        lines.append(f"{n} ranks, {size['counts']['all']:,.0f} series: obsgen rules {og:.1f} ms, "
                     f"naive {nv:.1f} ms (naive/obsgen {nv / og:.2f}), stragglers {strag:.1f}x "
                     f"cheaper, slowest panel {sp[1]['ms']:.1f} ms ({sp[0]})")
        for g, v in sorted(size["groups"].items()):
            lines.append(f"  {g:26s} {v['ms']:10.1f} ms {v['samples']:>14,.0f} samples")
    lines += ["ERROR " + e for e in errors(results)]
    return "\n".join(lines)


def config_line(results: dict) -> list[str]:
    """What the run's config set apart from the defaults (runs before it was recorded: none)."""
    changes = results.get("config")
    if not changes:
        return []
    told = ", ".join(f"`{k}: {json.dumps(v, sort_keys=True).replace(chr(34), '')}`"
                     for k, v in sorted(changes.items()))
    return [f"Config: obsgen's defaults with {told}, as [the sizing guide]"
            "(../docs/guides/sizing.md) sets them for a large job on one Prometheus "
            "(`scale.default_config`). The `before:` groups, where a run has them, are "
            "`benchmarks/baseline/rules.yaml` (its first lines say what they are).", ""]


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
           *config_line(results),
           *results.get("notes", [])]

    # targets ------------------------------------------------------------------------
    og = suite(big, "obsgen")
    worst_group = max(og.items(), key=lambda kv: kv[1]["ms"])
    all_groups = total_ms(big, "obsgen")
    sp = slowest_panel(big)
    strag, before_strag = straggler_ratio(big), straggler_ratio(big, "before")
    whole = total_ms(big, "naive") / all_groups
    like = [g for g in og if family(g) in naive_families()]
    like_ms = sum(per_evaluation(og[g]) for g in like)
    growth = {g: growth_exponent(small["groups"][g]["ms"], big["groups"][g]["ms"], small["ranks"], N)
              for g in og}
    worst_growth = max(growth.items(), key=lambda kv: float(kv[1]) if kv[1] != "-" else 0)
    out += ["## Targets", "",
            f"| target (at {N:,} ranks) | measured | |", "|---|---|---|",
            f"| every rule group < 1 s | slowest: {worst_group[0]}, {fmt_ms(worst_group[1]['ms'])} ms "
            f"| {yes(worst_group[1]['ms'] < GROUP_TARGET_MS)} |",
            f"| all groups together < 3 s | {fmt_ms(all_groups)} ms per 30 s (every group once: "
            f"{fmt_ms(once_ms(big, 'obsgen'))} ms; the groups marked below run every 1m or 2m) "
            f"| {yes(all_groups < SUITE_TARGET_MS)} |",
            f"| every panel over 1 h < 2 s | slowest: {sp[0]}, {fmt_ms(sp[1]['ms'])} ms "
            f"| {yes(sp[1]['ms'] < PANEL_TARGET_MS)} |",
            f"| straggler family >= 5x cheaper than the naive straggler rule | {strag:.2f}x "
            "(per 30 s: its group and, in proportion, its facts group, the mesh"
            + (f"; the `before:` groups: {before_strag:.2f}x" if before_strag else "") + ") "
            f"| {yes(strag >= STRAGGLER_TARGET)} |",
            f"| whole suite no more costly than the naive suite | naive / obsgen = {whole:.2f} "
            f"(the {len({family(g) for g in like})} families that replace the document's rules "
            f"alone: {total_ms(big, 'naive') / like_ms:.2f}; the other "
            f"{len({family(g) for g in og} - {family(g) for g in like})} check what "
            f"the document does not: {fmt_ms(all_groups - like_ms)} ms; ruler time per 30 s) "
            f"| {yes(whole >= 1)} |",
            f"| cost linear in N | largest growth exponent {small['ranks']:,} -> {N:,}: "
            f"{worst_growth[1]} ({worst_growth[0]}); 1 = linear, 2 = quadratic "
            f"| {yes(float(worst_growth[1]) < 1.3 if worst_growth[1] != '-' else True)} |", ""]
    factor = machine_factor(big)
    if factor and abs(factor - 1) > 0.1:
        out += [f"Machine speed: the naive suite, the same rules in every run, took "
                f"{fmt_ms(total_ms(big, 'naive'))} ms per 30 s at {N:,} ranks here, "
                f"{factor:.2f}x the {fmt_ms(REFERENCE_NAIVE_MS[N])} ms of the run the time "
                "budgets were first met on. At that run's speed (times divided by "
                f"{factor:.2f}) the slowest group takes {fmt_ms(worst_group[1]['ms'] / factor)} ms "
                f"({yes(worst_group[1]['ms'] / factor < GROUP_TARGET_MS)}) and all groups "
                f"{fmt_ms(all_groups / factor)} ms per 30 s "
                f"({yes(all_groups / factor < SUITE_TARGET_MS)}); the ratios above do not "
                "depend on the machine.", ""]
    out += records_targets(big)

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
        st = straggler_ratio(s)
        mem = s["memory"]
        out.append(f"| {s['ranks']:,} | {s['counts']['all']:,.0f} | {s['counts']['all'] / s['ranks']:.0f} "
                   f"| {fmt_ms(o)} | {fmt_ms(wg['ms'])} | {fmt_ms(nv)} | {nv / o:.2f} | {st:.1f} "
                   f"| {fmt_ms(slowest_panel(s)[1]['ms'])} | {fmt_mib(mem['obsgen']['rules_peak_rss'])} "
                   f"({fmt_mib(mem['obsgen']['panels_peak_rss'])}) / {fmt_mib(mem['naive']['rules_peak_rss'])} "
                   f"| {timed_rounds(s)} |")
    out.append("")

    # groups ---------------------------------------------------------------------------
    out += ["## Rule groups", "",
            "Evaluation ms per group at each size; samples read per evaluation at the largest "
            "size (Prometheus' `totalQueryableSamples`, which does not change with load: 2.42 "
            "counts a subquery's inner samples only partly, so the naive straggler rule's count "
            "is low); growth exponent k of cost ~ N^k from the smallest to the largest size. "
            "A group evaluated less often than every 30 s (a facts group, job shape and "
            "placement, every 2m, `facts_interval`, the straggler family's mesh every 4m, "
            "`facts_intervals`; the families of `family_intervals` every 1m or 2m) counts in "
            "the totals per 30 s in proportion: a 4m group an eighth, a 2m group a quarter, "
            "a 1m group half.", "",
            "| group | " + " | ".join(f"{s['ranks']:,}" for s in ss)
            + f" | samples at {N:,} | k | naive rule at {N:,} | naive / obsgen |",
            "|---|" + "---:|" * (len(ss) + 4)]
    for g in sorted(og):
        nv = None if g.endswith("-facts") else big["groups"].get(f"naive-{family(g)}")
        every = og[g].get("interval", EVALUATION)
        name = g if every == EVALUATION else f"{g} (every {every / 60:g}m)"
        row = [name] + [fmt_ms(s["groups"][g]["ms"]) for s in ss] + [
            f"{big['groups'][g]['samples']:,.0f}", growth[g],
            fmt_ms(nv["ms"]) if nv else "-", f"{nv['ms'] / og[g]['ms']:.1f}" if nv else "-"]
        out.append("| " + " | ".join(row) + " |")
    row = ["**all obsgen groups, per 30 s**"] + [fmt_ms(total_ms(s, "obsgen")) for s in ss] + [
        f"{sum(v['samples'] for v in og.values()):,.0f}",
        growth_exponent(total_ms(small, "obsgen"), all_groups, small["ranks"], N),
        fmt_ms(total_ms(big, "naive")), f"{whole:.2f}"]
    out += ["| " + " | ".join(row) + " |", ""]
    out += [f"Slowest rules at {N:,} ranks (median ms per evaluation):", ""]
    rules = sorted(((v["rules"][r], g, r) for g, v in og.items() for r in v["rules"]), reverse=True)
    out += ["| rule | group | ms |", "|---|---|---:|"]
    out += [f"| `{r}` | {g} | {fmt_ms(ms)} |" for ms, g, r in rules[:8]]
    out += ["", "The naive suite (each rule is its own group, named after the obsgen family that "
            "replaces it):", "", "| naive group | " + " | ".join(f"{s['ranks']:,}" for s in ss) + " |",
            "|---|" + "---:|" * len(ss)]
    for g in sorted(suite(big, "naive")):
        out.append(f"| {g} | " + " | ".join(fmt_ms(s["groups"][g]["ms"]) for s in ss) + " |")
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
        cells = [fmt_ms(s["panels"]["obsgen"][p]["ms"]) if s["panels"]["obsgen"][p]["samples"] else "-"
                 for s in ss]
        out.append(f"| {p} | {v['queries']} | " + " | ".join(cells) + f" | {v['samples']:,} |")
    out.append("")

    out += records_section(ss)
    out += findings(ss)
    out += drop_buckets_finding(ss, results.get("drop_buckets"), results.get("rules_sha"))
    # series ---------------------------------------------------------------------------
    out += series_section(big)
    out += method_section(results, big)
    return "\n".join(out) + "\n"


def _records_groups(size: dict) -> str:
    rec = suite(size, RECORDS)
    return ", ".join(f"`{g}` {fmt_ms(v['ms'])}" for g, v in rec.items())


def records_targets(big: dict) -> list[str]:
    """The targets with dashboards.records: its groups count with the others."""
    rec = suite(big, RECORDS)
    if not rec:
        return []
    N = big["ranks"]
    interval = next(iter(rec.values()))["interval"]
    worst = max([*suite(big, "obsgen").items(), *rec.items()], key=lambda kv: kv[1]["ms"])
    both = total_ms(big, "obsgen") + total_ms(big, RECORDS)
    p, pv = max(with_records(big).items(), key=lambda kv: kv[1]["ms"])
    return [f"With `dashboards.records: true` (the panels family, {len(rec)} groups every "
            f"{interval / 60:g}m, ms per evaluation: {_records_groups(big)}; "
            f"{fmt_ms(total_ms(big, RECORDS))} ms per 30 s together; off by default, see "
            "below):", "",
            f"| target (at {N:,} ranks) | measured | |", "|---|---|---|",
            f"| every rule group < 1 s | slowest: {worst[0]}, {fmt_ms(worst[1]['ms'])} ms "
            f"| {yes(worst[1]['ms'] < GROUP_TARGET_MS)} |",
            f"| all groups together < 3 s | {fmt_ms(both)} ms per 30 s | {yes(both < SUITE_TARGET_MS)} |",
            f"| every panel over 1 h < 2 s | slowest: {p}, {fmt_ms(pv['ms'])} ms "
            f"| {yes(pv['ms'] < PANEL_TARGET_MS)} |", ""]


def records_section(ss: list[dict]) -> list[str]:
    big = ss[-1]
    rec = panels_of(big, RECORDS)
    if not rec:
        return []
    groups = suite(big, RECORDS)
    interval = next(iter(groups.values()))["interval"]
    out = ["## dashboards.records: the slowest panels from recorded series", "",
           f"The panels that `dashboards.records: true` has read the panels family "
           f"(every {interval / 60:g}m) instead of raw series, ms over 1 h "
           "(sum of the panel's queries), default / with the records, measured on the same "
           "TSDB in the same run.", "",
           "| panel | " + " | ".join(f"{s['ranks']:,}: default / records" for s in ss) + " |",
           "|---|" + "---:|" * len(ss)]
    for p in sorted(rec, key=lambda p: -panels_of(big)[p]["ms"]):
        out.append(f"| {p} | " + " | ".join(
            f"{fmt_ms(panels_of(s)[p]['ms'])} / {fmt_ms(panels_of(s, RECORDS)[p]['ms'])}"
            for s in ss) + " |")
    rules = {r: ms for v in groups.values() for r, ms in v["rules"].items()}
    out += ["", "Its groups, ms per evaluation: " + "; ".join(
        f"{s['ranks']:,} ranks {_records_groups(s)}" for s in ss)
        + ". Its rules at the largest size: " + ", ".join(
        f"`{r}` {fmt_ms(ms)}" for r, ms in sorted(rules.items(), key=lambda kv: -kv[1])) + ".", ""]
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


def method_section(results: dict, big: dict) -> list[str]:
    b = big["built"]
    unread = _unread(big)
    per_unread = sum(big["series_per_rank"][u] for u in unread)
    us = per_series_us(big)
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
    if all(panels_of(s, RECORDS) for s in ss):  # the slowest panel of all with the records
        ax2.plot(ns, [max(v["ms"] for v in with_records(s).values()) for s in ss], marker="s",
                 lw=2.5, color="black", label="slowest panel with dashboards.records")
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


def with_drop_buckets(results: dict, here: Path) -> dict:
    """The results with the drop-buckets run saved beside them, which the report compares."""
    other = here / DROP_BUCKETS
    if other.exists() and "drop_buckets" not in results:
        results = {**results, "drop_buckets": json.loads(other.read_text())}
    return results


def text(results: dict, here: Path) -> str:
    """RESULTS.md: the scale run's report, and the sharded run's targets when its
    sharded.json is beside results.json."""
    out = markdown(with_drop_buckets(results, here))
    if (here / "sharded.json").exists():
        from . import sharded
        res = json.loads((here / "sharded.json").read_text())
        out += "\n".join(["", "## 131,072 ranks: sharded Prometheus and a central ruler", "",
                          f"From `benchmarks/sharded.py` (SHARDED.md): the shard tier on one "
                          f"shard of {res['ranks']:,} ranks, as each of 8 shards of a "
                          "131,072-rank job holds.", "",
                          *sharded.targets(res, sharded.load_centre(here))]) + "\n"
    return out


def write(results: dict, here: Path) -> None:
    (here / "RESULTS.md").write_text(text(results, here))
    results = with_drop_buckets(results, here)
    try:
        plot(results, here / "scale.png")
    except ImportError:
        print("matplotlib missing: pip install -e '.[bench]' for the plot")

"""The figures ``cli.py simulate`` prints, one ``Row`` each: its label, how a summary reads it, what the change
column compares, when it is shown (a pool the model lacks, an SLO not given: not at all)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reports.formatting import count, delta, fraction, seconds, share, used_of
from reports.simulate_header import Run
from sim.cache.components import Component
from sim.cache.reasons import REASONS
from sim.engines.pool_views import SUMMARY_NAMES
from sim.run.summary import Summary  # the rows read it by figure name


@dataclass(frozen=True)
class Row:
    label: str
    text: Callable[[Summary], str]
    value: Callable[[Summary], float | None] = lambda s: None  # what the change column compares
    shown: Callable[[list[Summary]], bool] = lambda runs: True
    # a row of several figures compares each (``-11.1 / 0 / 0``) instead of one ``value``
    changes: Callable[[Summary, Summary], str] | None = None


def _key(name: str) -> Callable[[Summary], float]:
    return lambda s: s[name]


def _counted(name: str) -> Row:
    return Row("", lambda s: count(s[name]), _key(name))


def _labelled(label: str, row: Row) -> Row:
    return Row(label, row.text, row.value, row.shown, row.changes)


def _each_changed(names: list[str], scale: float = 1.0) -> Callable[[Summary, Summary], str]:
    return lambda before, after: " / ".join(delta(scale * before[n], scale * after[n]) for n in names)


def _percentiles(prefix: str) -> list[str]:
    return [f"{prefix}_p{p}_s" for p in (50, 90, 99)]


def _three(prefix: str, scale: float = 1.0) -> Callable[[Summary], str]:
    return lambda s: " / ".join(seconds(scale * s[f"{prefix}_p{p}_s"]) for p in (50, 90, 99))


def _why_row(reason: str) -> Row:
    name = f"why_{reason}_tokens"
    return Row(
        f"  {REASONS[reason]}",
        lambda s: count(s.get(name, 0)),
        lambda s: s.get(name, 0),
        lambda runs: any(s.get(name, 0) for s in runs),
    )


REUSE_ROWS = [
    Row(
        "requests",
        lambda s: (
            count(s["requests"])
            + (f" ({count(s['rejected_requests'])} never ran)" if s["rejected_requests"] else "")
        ),
        _key("requests"),
    ),
    Row(
        "hits (requests reusing any prefix)",
        lambda s: f"{count(s['hits'])} / {count(s['requests'])}",
        _key("hits"),
    ),
    Row(
        "decode-region hits (follow-ups)",
        lambda s: (
            f"{count(s['decode_region_hits'])} / "
            f"{count(s['followup_requests'])} (ideal {count(s.get('ideal_decode_region_hits'))})"
        ),
        _key("decode_region_hits"),
        lambda runs: runs[0]["followup_requests"] > 0,
    ),
    _labelled("prompt tokens", _counted("prompt_tokens")),
    Row(
        "reused (cached) tokens",
        lambda s: f"{count(s['cached_tokens'])} ({share(s['cached_tokens'], s['prompt_tokens'])})",
        _key("cached_tokens"),
    ),
    Row(
        "upper bound: ideal reused tokens",
        lambda s: (
            f"{count(s['ideal_cached_tokens'])} ({share(s['ideal_cached_tokens'], s['prompt_tokens'])})"
        ),
        _key("ideal_cached_tokens"),
    ),
    Row(
        "bound: Belady (FULL, same budget)",
        lambda s: (
            f"{count(s['bound_belady_tokens'])} ({share(s['bound_belady_tokens'], s['prompt_tokens'])})"
        ),
        _key("bound_belady_tokens"),
        lambda runs: all("bound_belady_tokens" in s for s in runs),
    ),
    Row(
        "bound: any policy with these pools",
        lambda s: f"{count(s['bound_tokens'])} (reused {share(s['cached_tokens'], s['bound_tokens'])} of it)",
        _key("bound_tokens"),
        lambda runs: all("bound_tokens" in s for s in runs),
    ),
    Row(
        "bounds",
        lambda s: s.get("bound_skipped", "computed"),
        shown=lambda runs: any("bound_skipped" in s for s in runs),
    ),
    Row("mean reuse fraction", lambda s: fraction(s["mean_reuse_fraction"]), _key("mean_reuse_fraction")),
    _labelled("recomputed tokens, of which:", _counted("recomputed_tokens")),
    *(_why_row(reason) for reason in REASONS),
]


def _has(capacity: str) -> Callable[[list[Summary]], bool]:
    """A pool's rows are shown only where some run's model has the pool."""
    return lambda runs: any(s[capacity] for s in runs)


POOL_ROWS = [
    Row(
        "peak FULL held (tokens)",
        lambda s: used_of(s["peak_full_slots"], s["capacity_full_slots"]),
        _key("peak_full_slots"),
    ),
    Row(
        "peak SWA held (tokens)",
        lambda s: used_of(s["peak_swa_slots"], s["capacity_swa_slots"]),
        _key("peak_swa_slots"),
        _has("capacity_swa_slots"),
    ),
    Row(
        "mean SWA held (tokens)",
        lambda s: used_of(round(s["mean_swa_slots"]), s["capacity_swa_slots"]),
        _key("mean_swa_slots"),
        _has("capacity_swa_slots"),
    ),
    Row(
        "peak MAMBA held (states)",
        lambda s: used_of(s["peak_mamba_states"], s["capacity_mamba_states"]),
        _key("peak_mamba_states"),
        _has("capacity_mamba_states"),
    ),
    _labelled("retractions", _counted("retractions")),
]


def eviction_row(runs: list[Run]) -> Row:
    """Evictions of the pools some run has, in what each engine evicts (radix nodes, vLLM blocks)."""
    summaries = [run.summary for run in runs]
    comps = [
        c
        for c in Component
        if c == Component.FULL or any(s[f"capacity_{SUMMARY_NAMES[c]}"] for s in summaries)
    ]
    keys = [f"evictions_{c.layer_kind}" for c in comps]
    units = " | ".join(dict.fromkeys(run.layout.eviction_unit if run.layout else "nodes" for run in runs))
    return Row(
        f"evictions {' / '.join(c.pool_name for c in comps)} ({units})",
        lambda s: " / ".join(count(s[k]) for k in keys),
        changes=_each_changed(keys),
    )


TIME_ROWS = [
    Row("makespan (s)", lambda s: seconds(s["makespan_s"]), _key("makespan_s")),
    Row("output tokens/s", lambda s: count(round(s["output_tokens_per_s"])), _key("output_tokens_per_s")),
    Row("TTFT p50 / p90 / p99 (ms)", _three("ttft", 1000), changes=_each_changed(_percentiles("ttft"), 1000)),
    Row("TPOT p50 / p90 / p99 (ms)", _three("tpot", 1000), changes=_each_changed(_percentiles("tpot"), 1000)),
    Row("E2E p50 / p90 / p99 (s)", _three("e2e"), changes=_each_changed(_percentiles("e2e"))),
    Row("ITL p50 / p90 / p99 (ms)", _three("itl", 1000), changes=_each_changed(_percentiles("itl"), 1000)),
    Row("arrival rate (requests/s)", lambda s: f"{s['request_rate_per_s']:.3g}", _key("request_rate_per_s")),
    Row(
        "SLO attainment",
        lambda s: f"{s['slo_attainment']:.1%}",
        _key("slo_attainment"),
        lambda runs: all("slo_attainment" in s for s in runs),
    ),
    Row(
        "goodput (requests/s within the SLO)",
        lambda s: f"{s['goodput_requests_per_s']:.3g}",
        _key("goodput_requests_per_s"),
        lambda runs: all("goodput_requests_per_s" in s for s in runs),
    ),
]

"""What a capacity planner asks of a run: the arrival rate, inter-token latency percentiles, and, given
service-level objectives (``--slo ttft=S,tpot=S``), the share of requests that met them and the goodput.

A request meets the SLO when it was served and each given target holds: TTFT, TPOT (mean time per output
token after the first; a one-token answer has none and meets it) and end-to-end latency. ``slo_attainment``
is the share of all requests that met it (a request never served did not), ``goodput_requests_per_s`` those
requests over the makespan (DistServe's goodput; vLLM's ``bench serve --goodput``). The SLO "is met" at a
rate when the attainment reaches its target (``attainment=``, 0.9 unless given).

ITL, the time between two output tokens of one request, is read off the step table: every decode in a step
waited from the previous step's end to its own (the loop runs back to back while anything decodes), so a
step of ``n`` decodes contributes ``n`` samples of that gap; percentiles are the nearest rank over tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.sched.request import served_mask

TARGETS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_s"}
DEFAULT_ATTAINMENT = 0.9
PERCENTILES = (50, 90, 99)
# True: each percentile reads the one gap at its rank (``gaps[order[i]]``) from the columns as numpy arrays; False:
# every gap gathered in order once per percentile (``gaps[order][i]``: a new array the table's length each, in
# fresh memory), the ends added as pandas columns (the reference; tests/test_table_figures_lean.py)
ITL_GAP_AT_RANK = True


@dataclass(frozen=True)
class Slo:
    targets: dict[str, float]  # "ttft" / "tpot" / "e2e" -> seconds
    attainment: float = DEFAULT_ATTAINMENT  # the share of requests that must meet them

    def met(self, requests: pd.DataFrame) -> pd.Series:
        """Which requests were served within every target."""
        ok = served_mask(requests).copy()
        for name, limit in self.targets.items():
            values = requests[TARGETS[name]].astype(float)
            ok &= (values <= limit) | (values.isna() if name == "tpot" else False)
        return ok

    def describe(self) -> str:
        parts = [f"{name} <= {limit:g} s" for name, limit in self.targets.items()]
        return " and ".join(parts) + f" for {self.attainment:.0%} of requests"


def parse_slo(text: str) -> Slo:
    """``"ttft=2,tpot=0.1"`` (seconds; also ``e2e=``, and ``attainment=0.99``) -> ``Slo``; ValueError naming
    the part that is wrong."""
    targets: dict[str, float] = {}
    attainment = DEFAULT_ATTAINMENT
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in (*TARGETS, "attainment"):
            raise ValueError(
                f"--slo: {part!r} is not NAME=SECONDS with NAME one of {', '.join(TARGETS)} (or "
                "attainment=SHARE)"
            )
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"--slo: {part!r}: {value.strip()!r} is not a number") from None
        if not (number > 0 and np.isfinite(number)) or (name == "attainment" and number > 1):
            raise ValueError(f"--slo: {part!r} must be > 0" + (" and <= 1" if name == "attainment" else ""))
        if name == "attainment":
            attainment = number
        else:
            targets[name] = number
    if not targets:
        raise ValueError(f"--slo {text!r} sets no target; give e.g. ttft=2,tpot=0.1 (seconds)")
    return Slo(targets, attainment)


@dataclass(frozen=True, kw_only=True)
class CapacityFigures:
    """The summary's capacity section (time figures 0 in replay mode; the SLO's absent without ``--slo``)."""

    request_rate_per_s: float
    itl_p50_s: float
    itl_p90_s: float
    itl_p99_s: float
    slo_attainment: float | None = None
    goodput_requests_per_s: float | None = None


def capacity_figures(requests: pd.DataFrame, steps: pd.DataFrame, slo: str | None) -> CapacityFigures:
    itl = itl_percentiles(steps)
    rate = arrival_rate(requests)
    if slo is None:
        return CapacityFigures(request_rate_per_s=rate, **itl)
    met = int(parse_slo(slo).met(requests).sum())
    makespan = float(requests["finished_at"].max()) if len(requests) else 0.0
    return CapacityFigures(
        request_rate_per_s=rate,
        **itl,
        slo_attainment=round(met / len(requests), 6) if len(requests) else 0.0,
        goodput_requests_per_s=round(met / makespan, 6) if makespan > 0 else 0.0,
    )


def arrival_rate(requests: pd.DataFrame) -> float:
    """Requests over the span of arrivals (as they arrived in the run: scaled), 0 when they all came at once."""
    arrivals = requests["arrival_at"].dropna().astype(float)
    span = float(arrivals.max() - arrivals.min()) if len(arrivals) else 0.0
    return round((len(arrivals) - 1) / span, 6) if span > 0 else 0.0


def itl_percentiles(steps: pd.DataFrame) -> dict[str, float]:
    """``itl_p50_s`` ... over every decoded token (nearest rank); 0.0 without steps in time (replay)."""
    names = [f"itl_p{p}_s" for p in PERCENTILES]
    if "start_at" not in steps or not len(steps):
        return dict.fromkeys(names, 0.0)
    gaps = _step_gaps(steps)
    weights = steps["num_decode"].to_numpy(dtype=np.int64)
    if not weights.sum():
        return dict.fromkeys(names, 0.0)
    order = np.argsort(gaps, kind="stable")
    cumulative = np.cumsum(weights[order])
    out = {}
    for name, p in zip(names, PERCENTILES, strict=True):
        rank = max(1, int(np.ceil(p / 100 * cumulative[-1])))
        at = np.searchsorted(cumulative, rank)
        out[name] = round(float(gaps[order[at]] if ITL_GAP_AT_RANK else gaps[order][at]), 6)
    return out


def _step_gaps(steps: pd.DataFrame) -> np.ndarray:
    """Each step's end less the end before it (the first step's: less its start)."""
    if not ITL_GAP_AT_RANK:
        ends = (steps["start_at"] + steps["duration_s"]).to_numpy(dtype=float)
        return np.diff(ends, prepend=steps["start_at"].to_numpy(dtype=float)[:1])
    starts = steps["start_at"].to_numpy(dtype=float)
    ends = starts + steps["duration_s"].to_numpy(dtype=float)  # the same IEEE sums as the columns' ``+``
    return np.diff(ends, prepend=starts[:1])

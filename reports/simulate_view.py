"""What ``cli.py simulate`` prints for one run, or two side by side (``--compare``): a header with the
configuration as it resolved and the pools' capacities, then one row per figure, as aligned text or a
markdown table ready to paste into a pull request."""

from __future__ import annotations

import textwrap

from reports.escape import plain
from reports.formatting import change
from reports.simulate_header import Run, header_lines
from reports.simulate_rows import POOL_ROWS, REUSE_ROWS, TIME_ROWS, Row, eviction_row
from sim.run.summary import Summary

TEXT_WIDTH = 110  # header lines wrap here: a terminal or a pull request's code block


def rows(runs: list[Run], timed: bool) -> list[tuple[str, ...]]:
    """(figure, value per run[, change]) for every row shown; replay mode has no time rows. Two runs that
    served different numbers of requests get no change for their latencies: each is over its own served
    requests (a run that served none has the best TTFT of all)."""
    summaries = [run.summary for run in runs]
    table = []
    pools = [*POOL_ROWS[:-1], eviction_row(runs), POOL_ROWS[-1]]
    shown = [(row, False) for row in REUSE_ROWS + pools] + [(row, not timed) for row in TIME_ROWS]
    comparable = len({num_served(s) for s in summaries}) == 1
    for row, untimed in shown:
        if not row.shown(summaries):
            continue
        if untimed:
            table.append((row.label, *["none (replay)"] * len(runs), *(["-"] if len(runs) == 2 else [])))
            continue
        cells = [row.text(s) for s in summaries]
        if len(runs) == 2:
            latency = row in TIME_ROWS and row.label not in SERVED_ALIKE
            cells.append(_change_cell(row, *summaries) if comparable or not latency else "-")
        table.append((row.label, *cells))
    return table


def num_served(summary: Summary) -> int:
    return summary["requests"] - summary["rejected_requests"]


SERVED_ALIKE = ("arrival rate (requests/s)",)  # the arrivals, whatever was served


def _change_cell(row: Row, before: Summary, after: Summary) -> str:
    if row.changes is not None:
        return row.changes(before, after)
    old, new = row.value(before), row.value(after)
    return change(old, new) if old is not None else ""


def render_text(runs: list[Run], title: str, timed: bool) -> str:
    table = rows(runs, timed)
    names = ["figure", *(run.policy for run in runs)] + (["change"] if len(runs) == 2 else [])
    widths = [max(len(str(r[i])) for r in [names, *table]) for i in range(len(names))]
    lines = [textwrap.fill(line, TEXT_WIDTH, subsequent_indent="    ") for line in header_lines(runs, title)]
    lines.append("")
    for line in [names, *table]:
        cells = [f"{line[0]:<{widths[0]}}"] + [
            f"{cell:>{w}}" for cell, w in zip(line[1:], widths[1:], strict=True)
        ]
        lines.append("  " + "  ".join(cells).rstrip())
    return "\n".join(lines)


def render_markdown(runs: list[Run], title: str, timed: bool) -> str:
    table = rows(runs, timed)
    names = ["figure", *(f"`{run.policy}`" for run in runs)] + (["change"] if len(runs) == 2 else [])
    head = header_lines(runs, title)
    lines = (
        [f"**{plain(head[0])}**", ""] + [f"- {line}" for line in head[1:]] + [""]
    )  # the title names the trace
    lines.append("| " + " | ".join(names) + " |")
    lines.append("|" + "|".join([":---"] + ["---:"] * (len(names) - 1)) + "|")
    for row in table:
        label = row[0].strip()
        label = f"&nbsp;&nbsp;{label}" if row[0].startswith("  ") else label
        lines.append("| " + " | ".join([label, *row[1:]]) + " |")
    return "\n".join(lines)

"""Why each point's recomputed tokens (over the requests in scope) were recomputed: one column per reason
(``sim/run/why.py``), so a reviewer sees which mechanism a policy change moved."""

from __future__ import annotations

import pandas as pd

from reports.grid_data import GridData, in_scope
from reports.grid_tables import setting_columns
from sim.cache.reasons import REASONS
from sim.run.why import why_tokens


def why_table(data: GridData) -> pd.DataFrame | None:
    """None for a store whose request tables have no ``why`` column (written before it existed)."""
    keys = list(data.points["key"])
    if not keys or "why" not in data.requests(keys[0]):
        return None
    totals = [why_tokens(in_scope(data.requests(key), data.scope)) for key in keys]
    table = pd.DataFrame({"point": keys})
    if len(data.policies()) > 1 or not data.settings:  # one policy: the header names it
        table["policy"] = list(data.points["policy"])
    for name, values in setting_columns(data).items():
        table[name] = values
    table["recomputed tokens"] = list(data.points["scoped_recomputed_tokens"])
    for reason, label in REASONS.items():
        if any(total[reason] for total in totals):
            table[label] = [total[reason] for total in totals]
    return table

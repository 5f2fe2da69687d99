"""The three kinds of cache memory a node can hold, by name; each has its own LRU stamp on a node."""
from __future__ import annotations

FULL, SWA, STATE = "full", "swa", "state"
COMPONENTS = (FULL, SWA, STATE)
STAMP_OF = {FULL: "full_stamp", SWA: "swa_stamp", STATE: "state_stamp"}

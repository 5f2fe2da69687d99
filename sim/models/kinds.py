"""The layer kinds a model mixes: FULL attention, sliding-window attention (SWA) and MAMBA (SSM) layers."""

from __future__ import annotations

FULL, SWA, MAMBA = "full", "swa", "mamba"
LAYER_KINDS = (FULL, SWA, MAMBA)

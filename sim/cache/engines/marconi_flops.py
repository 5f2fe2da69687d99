"""Marconi's FLOP efficiency of a cache node: the prefill FLOPs its state saves per byte it holds.

A node ending at ``end`` whose nearest ancestor with a state ends at ``parent_end`` saves, on a hit, the
prefill of tokens ``[parent_end, end)`` with the first ``parent_end`` cached (every layer: weights, MAMBA
state updates, attention over the prefix, from the model preset as ``sim/cost.py`` counts them), and holds
one MAMBA state plus the KV of those tokens. Two readings (knob ``marconi_follows``):

- ``paper``: exactly that (MLSys'25 section 4.2: FLOPs saved relative to the parent over the node's memory).
- ``code``: what the reference code computes (``radix_cache_hybrid.py: evict_v2``): the bytes count the KV of
  the whole prefix ``[0, end)``, and the MLP term subtracts the parent prefix's *attention* FLOPs (projections
  plus ``P^2`` scores of one layer) instead of its MLP FLOPs, in every layer.
"""

from __future__ import annotations

from sim.cost import attended_sum
from sim.models import FULL, SWA, ModelSpec

_MAX_REMEMBERED = 1 << 16  # efficiencies a NodeCost keeps (a pure function of two ends: forgetting is safe)


class NodeCost:
    def __init__(self, model: ModelSpec, window: int, follows: str):
        self.code = follows == "code"
        self.window = window
        self.per_token = 2 * model.active_param_count() + model.state_flops_per_token()
        self.full_attend = model.attention_flops_per_attended_token(FULL)
        self.swa_attend = model.attention_flops_per_attended_token(SWA) if model.has_swa else 0
        self.kv_bytes = model.full_kv_bytes_per_token() + model.swa_kv_bytes_per_token()
        self.state_bytes = model.mamba_state_bytes() if model.has_mamba else 0
        self._mlp_vs_attention = _mlp_vs_attention(model)
        self.remembered: dict[tuple[int, int], float] = {}  # ``efficiency``'s, by (parent_end, end)

    def prefill_flops(self, start: int, count: int) -> int:
        """FLOPs of computing tokens ``[start, start + count)`` with ``[0, start)`` cached."""
        if count <= 0:
            return 0
        swa = self.swa_attend * attended_sum(start, count, self.window) if self.swa_attend else 0
        return count * self.per_token + self.full_attend * attended_sum(start, count) + swa

    def saved(self, parent_end: int, end: int) -> int:
        flops = self.prefill_flops(parent_end, end - parent_end)
        if self.code:
            flops += self._mlp_vs_attention(parent_end)
        return flops

    def held_bytes(self, parent_end: int, end: int) -> int:
        tokens = end if self.code else end - parent_end
        return self.state_bytes + self.kv_bytes * tokens

    def efficiency(self, parent_end: int, end: int) -> float:
        """Remembered: every eviction scores every candidate, and most candidates stay from one to the next."""
        key = (parent_end, end)
        known = self.remembered.get(key)
        if known is None:
            held = self.held_bytes(parent_end, end)
            known = self.saved(parent_end, end) / held if held else 0.0
            if len(self.remembered) >= _MAX_REMEMBERED:  # memory flat in trace length
                self.remembered.clear()
            self.remembered[key] = known
        return known

    def leaf_bytes_counted(self, edge_len: int) -> int:
        """What the reference code adds to its evicted-bytes count for a leaf: one state and ``edge_len``
        tokens of KV (of the *last candidate it scored*, a stale loop variable, not of the victim)."""
        return self.state_bytes + self.kv_bytes * edge_len


def _mlp_vs_attention(model: ModelSpec):
    """``code`` reading's MLP defect as a function of the parent's length P: every layer's MLP FLOPs of P
    tokens minus one attention layer's FLOPs of P tokens (projections + P x P scores), added to the savings."""
    kv_heads, head_dim = model.full_kv_geometry()
    d = model.d_model
    attention_params = 2 * d * model.num_q_heads * head_dim + 2 * d * kv_heads * head_dim
    mlp_params = 3 * d * (model.d_ff * model.experts_per_token + model.shared_d_ff)
    scores_per_pair = 4 * model.num_q_heads * head_dim
    num_layers = len(model.layer_kinds)

    def delta(parent_len: int) -> int:
        attention = 2 * parent_len * attention_params + scores_per_pair * parent_len * parent_len
        return num_layers * (2 * parent_len * mlp_params - attention)

    return delta

"""Bounds every result is measured against: what no policy could beat on this trace with these pools.

- ``ideal`` (``sim/bounds/upper_bound.py``): an infinite FULL-attention cache at page 1.
- ``belady`` (``belady.py``): the offline optimum for FULL attention under the same FULL budget, at the
  policy's page size: Belady's furthest-next-use eviction with bypass over the pages of a prefix trie.
- ``hybrid`` (``state_bound.py``): for models with MAMBA or SWA, a clairvoyant admission and eviction of the
  states and windows later requests need, under the same MAMBA (and SWA) budget, capped by ``belady``.

Both are computed over the run's own order of events (``events.py``): each request's lookup, and the pages
it computes. Definitions and proofs: docs/bounds.md.
"""

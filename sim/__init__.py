"""The simulator: a faithful model of an engine's prefix-cache policy, replayed over a trace.

Layers, lowest first (tests/test_layering.py enforces them; docs/ARCHITECTURE.md draws them): ``tokens``,
``atomic``, ``models``, ``code_version``, ``progress`` (shared ground); ``trace`` (requests, formats,
importers); ``cost`` (seconds per engine step); ``cache`` (pools, radix tree, engine rules: no SimPy);
``bounds`` (what no policy could beat); ``run`` (the SimPy engine and the replay, the tables); ``grid`` and
``experiments`` (many runs). Nothing here imports ``reports``, ``executor`` or ``commands``.

``compiled_core``: with ``HYBRIDCACHE_COMPILED`` set, the submodules come from the mypyc build of these sources.
"""

from sim import compiled_core

compiled_core.activate(__path__)

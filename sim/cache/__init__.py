"""The cache model: pools (storage) apart from the radix tree (index), and the engine rules that decide.

``manager.CacheManager`` is the one interface the run layer calls (``interface.py`` the protocol and the
no-cache baseline); ``engines/`` one module of rules per engine, chosen by a preset's ``engine``
(``policies.py``); ``blocks/`` vLLM's block pool in place of the tree; ``integrity.check_integrity`` the
invariants tests assert. No SimPy, no torch: the same objects drive the simulator and the real executor.
"""

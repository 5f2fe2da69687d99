"""The prefix cache of one inference engine, without time: what a request reuses, where checkpoints land,
what is freed and evicted, and how full each pool is.

``interface.py`` is the door (``CacheModel``, ``make_manager``); ``manager.py`` runs the request lifecycle over
the radix ``tree.py`` and the ``pools.py`` (one per ``components.Component``), asking the engine's rules in
``engines/`` (one module per engine) every engine-specific question; ``blocks/`` is vLLM's block-pool cache
behind the same interface; ``integrity.py`` the invariants tests check (``check_integrity``). No SimPy, no torch:
the same objects drive the simulator and the real executor. Nothing here imports the run layer.
"""

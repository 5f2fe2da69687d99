"""Engines, each one typed entry (``entry.Engine``): its cache (radix rules from ``sim/cache/engines/`` or a
manager of its own, ``sim/cache/blocks/``), its scheduler (``sim/sched/``), its own knobs, its pool sizing,
its GPU defaults, its presets and whether ``execute`` runs it. ``registry`` holds them by name with the knob
schema over all of them; ``sglang``, ``freetoken``, ``marconi``, ``vllm``, ``nocache`` are the entries,
``radix`` what the radix engines share, ``pool_sizing`` the pools from a run's options, ``negative`` the
deliberately wrong presets.
"""

"""Conformance: each engine's own cache code, driven on seeded scenarios, against ``simulate``.

``scenario.py`` makes scenarios (a trace served one request at a time, plus the engine's knobs and
pools); ``engines/<name>.py`` drives one engine's real cache objects on a scenario and reports what the
engine itself says each request reused; ``compare.py`` runs the same scenario through ``simulate`` in
replay and timed mode and lists every request where the two disagree.
"""

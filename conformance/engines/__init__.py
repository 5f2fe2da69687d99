"""One driver per engine. Each exposes ``ENGINE`` (its name), ``accepts(config) -> str | None`` (why the
engine rejects a configuration, or None) and ``run(scenario) -> dict[str, EngineOutcome]``; it imports
the engine's package only inside ``run`` so that this package loads without any engine installed."""

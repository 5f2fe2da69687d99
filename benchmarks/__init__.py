"""Benchmarks: scripts that print figures (docs/benchmarks.md); never timed unit tests. A package, so the
scripts that share a module import it as benchmarks.<name> and mypy reads each file once."""

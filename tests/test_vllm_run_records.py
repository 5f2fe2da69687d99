"""benchmarks/vllm_run_records.py on the 40-line Mooncake head (in its own interpreter: it wraps the pool's
classes): it runs, and its shadow of the free tail agrees with what went in and out of the tail."""
from __future__ import annotations

from tests.benchmark_helpers import HEAD, run_script


def counts_of(out: str) -> dict[str, float]:
    return {line[:58].strip(): float(line[58:].replace(",", "")) for line in out.splitlines()}


def test_run_records_counts_add_up():
    counts = counts_of(run_script("vllm_run_records.py", "--trace", str(HEAD), "--limit", "40"))
    assert counts["cache blocks"] > 0 and counts["free blocks"] > 0 and counts["hit blocks"] > 0
    in_tail = counts["free blocks"] - counts["hit taken from the tail blocks"] - counts.get("evict blocks", 0)
    assert counts["tail at the end blocks"] == in_tail
    for op in ("cache", "free", "hit"):
        assert 0 < counts[f"{op} records"] <= counts[f"{op} blocks"]

"""Ray runs the same points as local worker processes and stores byte-identical results.

Skipped where Ray is not installed (``pip install -e '.[ray]'``); a private local Ray (2 CPUs, no
dashboard) starts in about 10-20 s, so the test stays in the default run.
"""
from __future__ import annotations

import pytest

from sim.grid.axes import expand, parse_axes
from sim.grid.runners import LOCAL_RAY
from sim.grid.sweep import run_grid
from sim.trace import write_trace
from sim.trace.generate import s1

pytest.importorskip("ray")


def test_local_ray_and_local_processes_give_identical_tables(tmp_path):
    trace_path = tmp_path / "s1.jsonl"
    write_trace(s1(num_prompts=4), trace_path)
    configs = expand(parse_axes({"policy": "sglang,sglang-retain", "page_size": "64,128",
                                 "track_interval": "64,256", "chunked_prefill_size": "16384",
                                 "pool_tokens": "4000000", "mamba_states": "4096"}))
    local = run_grid(trace_path, configs, tmp_path / "local", jobs=2, progress=False)
    on_ray = run_grid(trace_path, configs, tmp_path / "ray", jobs=2, ray_address=LOCAL_RAY, progress=False)
    assert len(on_ray.ran) == 6 and len(on_ray.failed) == 2  # interval 64 at page 128 fails on Ray too
    assert [f["error"] for f in on_ray.failed] == [f["error"] for f in local.failed]
    assert (tmp_path / "ray" / "grid.csv").read_bytes() == (tmp_path / "local" / "grid.csv").read_bytes()
    for point in local.points:
        for name in (f"points/{point.key}.json", f"points/{point.key}.steps.csv", f"failed/{point.key}.json"):
            if (tmp_path / "local" / name).exists():
                assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()

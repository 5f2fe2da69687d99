"""An engine describes itself: the knobs it reads, its pools (names, units, block size, capacity), what the
model settles; headers, the simulate JSON and a grid's table say only that (issue 25, item 1)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli import cli
from sim.cache.components import Component
from sim.engines.registry import KNOBS, knob_values, make_policy
from sim.run.config import SimConfig
from sim.run.setup import build

IGNORED_BY_VLLM = (
    "track_interval",
    "swa_free_trigger",
    "swa_eviction_interval",
    "iteration_phase",
    "swa_pool_floor",
    "mamba_chunk",
)
VLLM_RETENTION = [
    "--policy",
    "vllm",
    "--model",
    "qwen3.5-4b",
    "--prefill-checkpoints",
    "off",
    "--retention-interval",
    "2112",
]


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_a_vllm_policy_lists_only_the_knobs_vllm_reads():
    knobs = knob_values(make_policy("vllm", retention_interval=2112))
    assert not set(IGNORED_BY_VLLM) & set(knobs)
    assert knobs["retention_interval"] == 2112 and knobs["page_size"] == 16
    sglang = knob_values(make_policy("sglang-retain"))
    assert "retention_interval" not in sglang and "retain_floor" in sglang and "track_interval" in sglang
    assert all(KNOBS[name].hidden or name in sglang for name in ("swa_free_trigger", "iteration_phase"))


def test_the_simulate_header_and_json_of_vllm_name_its_blocks_not_radix_grids():
    result = invoke(
        "simulate", "--trace", "traces/fanout.jsonl", *VLLM_RETENTION, "--mode", "replay", "--no-bounds"
    )
    assert result.exit_code == 0, result.output
    header = result.output.split("\n\n")[0]
    assert not any(name in header for name in IGNORED_BY_VLLM) and "track grid" not in header
    assert "retention_interval 2112" in header and "blocks of 528 tokens" in header
    assert "SWA held" not in result.output  # qwen3.5-4b has no SWA layers
    assert "evictions FULL / MAMBA (blocks)" in result.output
    payload = json.loads(
        invoke(
            "simulate",
            "--trace",
            "traces/fanout.jsonl",
            *VLLM_RETENTION,
            "--mode",
            "replay",
            "--no-bounds",
            "--format",
            "json",
        ).output
    )
    assert not set(IGNORED_BY_VLLM) & set(payload["resolved"]["knobs"])
    assert payload["resolved"]["grids"] == {}


def test_vllm_pools_are_one_block_pool_counted_in_its_blocks():
    setup = build(SimConfig(policy="vllm", model="qwen3.5-4b", knobs={"prefill_checkpoints": False}))
    layout = setup.pool_layout()
    assert [v.component for v in layout.views] == [Component.FULL, Component.MAMBA]
    full = layout.view(Component.FULL)
    assert full.per_count == 528 and full.capacity == setup.sizes.blocks * 528 and full.unit == "tokens"
    assert layout.view(Component.MAMBA).capacity == setup.sizes.blocks
    assert layout.eviction_unit == "blocks" and "blocks of 528 tokens" in layout.shared


@pytest.mark.parametrize(
    ("policy", "model", "components"),
    [
        ("sglang-retain", "inkling", [Component.FULL, Component.SWA, Component.MAMBA]),
        ("radix", "inkling", [Component.FULL]),
        ("sglang", "qwen3.5-4b", [Component.FULL, Component.MAMBA]),
    ],
)
def test_radix_pools_are_the_components_the_policy_keeps(policy, model, components):
    setup = build(SimConfig(policy=policy, model=model))
    layout = setup.pool_layout()
    assert [v.component for v in layout.views] == components and layout.eviction_unit == "nodes"
    assert layout.view(Component.FULL).capacity == setup.sizes.full_pages * setup.policy.page_size


def test_marconi_byte_budget_says_the_pools_share_it():
    setup = build(SimConfig(policy="marconi", model="qwen3.5-4b", cache_bytes=2 * 2**30))
    assert "one byte budget of 2 GiB" in setup.pool_layout().describe()


def test_an_uneven_retention_interval_names_the_block_size_that_takes_it():
    result = invoke(
        "simulate",
        "--trace",
        "traces/fanout.jsonl",
        "--policy",
        "vllm",
        "--model",
        "qwen3.5-4b",
        "--retention-interval",
        "2112",
    )
    assert result.exit_code == 2
    assert "--prefill-checkpoints off" in result.output and "block size 528" in result.output
    assert "1728 and 2304" in result.output


def test_policies_lists_for_vllm_only_the_knobs_it_reads():
    listing = invoke("policies", "--model", "qwen3.5-4b").output
    vllm = listing.split("\nvllm ")[1].split("\n", 2)[1]
    assert "retention_interval 0" in vllm and "block size 576" in vllm
    assert not any(f"{name} " in vllm for name in IGNORED_BY_VLLM)

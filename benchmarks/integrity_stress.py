"""``check_integrity()`` after every operation of long random runs of the cache manager, for every preset.

The manager is driven directly, as a scheduler drives it (admit, next_chunk_len, prepare/complete prefill,
prepare/complete decode, finish, abort), on small pools so that they run out all the time: refusals,
requests aborted when a step cannot get memory (a scheduler's retraction), requests retracted at random
while they run, then sent again (a retracted request's second admission matches what the others left).
Every few thousand operations a new scenario starts: another model shape (FULL, FULL+SWA, FULL+MAMBA,
all three), page size, window, pool sizes and chunk. Prints, per preset, the operations checked and how
often each situation came up.

    python benchmarks/integrity_stress.py [--ops 100000] [--seed 0] [--preset P]...
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from sim.align import ceil_div  # noqa: E402
from sim.cache.blocks.manager import BlockCacheManager  # noqa: E402
from sim.cache.interface import CacheModel  # noqa: E402
from sim.cache.results import Refusal  # noqa: E402
from sim.cache.sizing import PoolSizes  # noqa: E402
from sim.engines.registry import PRESETS, engine_of, make_manager, make_policy  # noqa: E402
from sim.models import get_model  # noqa: E402
from sim.tokens import TokenSeq  # noqa: E402

SOUND_PRESETS = [name for name in PRESETS if not name.startswith("broken-")]
KINDS = [("full",), ("swa", "full"), ("mamba", "full"), ("swa", "mamba", "full")]
OPS_PER_SCENARIO = 4000
MAX_ACTIVE = 8  # requests admitted at once, as a scheduler's running batch
MAX_DRAWS = 100  # configurations drawn for a scenario before the preset is said to refuse them all


class Driver:
    """Random requests through one manager, one operation at a time; counts what happened."""

    def __init__(self, manager: CacheModel, chunk: int, rng: random.Random, counts: Counter):
        self.manager, self.chunk, self.rng, self.counts = manager, chunk, rng, counts
        self.active: dict[str, list] = {}  # id -> [tokens, prompt_len, decodes left]
        self.retracted: list[tuple] = []  # (id, tokens, prompt_len, output_len) to send again
        self.iteration, self.next_id = 0, 0

    def operate(self) -> None:
        roll = self.rng.random()
        if not self.active or (roll < 0.12 and len(self.active) < MAX_ACTIVE):
            self.admit()
        elif roll < 0.14:
            self.retract(self.rng.choice(sorted(self.active)))
        else:
            self.step(self.rng.choice(sorted(self.active)))
        self.counts["ops"] += 1
        if _exhausted(self.manager):
            self.counts["a pool exhausted"] += 1

    def admit(self) -> None:
        if self.retracted and self.rng.random() < 0.5:
            rid, tokens, prompt_len, output_len = self.retracted.pop(0)
            self.counts["readmissions"] += 1
        else:
            rid, tokens, prompt_len, output_len = self.new_request()
        result = self.manager.admit(rid, tokens, prompt_len)
        if isinstance(result, Refusal):
            self.counts["admissions refused"] += 1
            return
        self.counts["admissions"] += 1
        self.counts["cache hits"] += result.match.cached_len > 0
        self.active[rid] = [tokens, prompt_len, output_len - 1]

    def new_request(self) -> tuple[str, TokenSeq, int, int]:
        rng = self.rng
        parts = [(f"sys{rng.randrange(3)}", rng.choice([6, 17, 33, 70]))]
        parts += [(f"u{rng.randrange(4)}", rng.randint(1, 30)) for _ in range(rng.randint(0, 3))]
        parts.append((f"q{rng.randrange(8)}", rng.randint(1, 40)))
        prompt = TokenSeq([("r:" + ref, 0, length) for ref, length in parts])
        rid, output_len = f"r{self.next_id}", rng.randint(1, 40)
        self.next_id += 1
        return rid, prompt + TokenSeq.of("o:" + rid, output_len), len(prompt), output_len

    def step(self, rid: str) -> None:
        tokens, prompt_len, decodes_left = self.active[rid]
        # an overlap loop processes the request's last step before it schedules the next: what the rules held
        # back then (a prompt's commit) lands now
        self.manager.settle(rid, 0)
        req = self.manager.requests[rid]
        self.iteration += 1
        if req.kv_len < prompt_len:
            size = self.manager.next_chunk_len(rid, self.chunk)
            if size == 0:
                self.counts["chunks of 0"] += 1
                return
            plan = self.manager.prepare_prefill(rid, size, self.iteration)
            self.complete(rid, plan, lambda: self.manager.complete_prefill(rid, size), "prefill")
        elif decodes_left > 0:
            plan = self.manager.prepare_decode(rid, self.iteration)
            if self.complete(rid, plan, lambda: self.manager.complete_decode(rid), "decode"):
                self.active[rid][2] -= 1
        else:
            self.manager.finish(rid)
            del self.active[rid]
            self.counts["finished"] += 1

    def complete(self, rid: str, plan, done, what: str) -> bool:
        if isinstance(plan, Refusal):  # no memory for this step: the scheduler retracts the request
            self.counts[f"{what} steps refused (retracted)"] += 1
            self.retract(rid)
            return False
        done()
        self.counts[f"{what} steps"] += 1
        return True

    def retract(self, rid: str) -> None:
        tokens, prompt_len, _ = self.active.pop(rid)
        self.manager.abort(rid)
        self.counts["retractions"] += 1
        self.retracted.append((rid, tokens, prompt_len, len(tokens) - prompt_len))


def scenario(preset: str, rng: random.Random) -> tuple[CacheModel, int]:
    page = rng.choice([1, 2, 4, 8, 16])
    kinds = rng.choice(KINDS)
    window = rng.choice([4, 8, 16, 24, 40]) if "swa" in kinds else 0
    model = replace(
        get_model("tiny"), layer_kinds=kinds, window=window, mamba_chunk=rng.choice([2, 4, 8, 16])
    )
    if engine_of(make_policy(preset)).rules is None:  # vLLM: one shared block pool, its own defaults
        return _block_scenario(preset, model, rng)
    knobs = dict(
        page_size=page,
        track_interval=page * rng.randint(1, 4),
        swa_free_trigger=rng.choice(["tokens", "iterations"]),
        swa_eviction_interval=rng.choice([1, 4, 16]),
    )
    for _ in range(MAX_DRAWS):
        try:
            policy = make_policy(preset, **knobs)
            least = max(4, 256 // page)  # a request's tokens at most, so that an engine's budget admits some
            sizes = PoolSizes(
                rng.randint(least, 4 * least), rng.randint(least, 4 * least), rng.randint(3, 12)
            )
            return make_manager(model, policy, sizes), page * rng.randint(1, 8)  # a budget of whole pages
        except ValueError:  # a combination the engine refuses (FreeToken: chunk a multiple of the page)
            knobs["page_size"] = page = rng.choice([1, 2])
            knobs["track_interval"] = page * rng.randint(1, 4)
    raise SystemExit(f"integrity_stress: {preset} refused {MAX_DRAWS} drawn configurations (last {knobs})")


def _block_scenario(preset: str, model, rng: random.Random) -> tuple[CacheModel, int]:
    """vLLM's manager on a pool of one to four requests' worth of blocks (a request is at most 256 tokens)."""
    from sim.cache.blocks.layout import policy_layout

    policy = make_policy(preset)
    block = policy_layout(model, policy).block_size
    # a request's blocks, its MAMBA live and checkpoint blocks and the null block: what vLLM starts with
    least = 8 + ceil_div(256, block)
    sizes = PoolSizes(0, 0, 0, blocks=rng.randint(least, 2 * least))
    return make_manager(model, policy, sizes), block * rng.randint(1, 4)


def _exhausted(manager: CacheModel) -> bool:
    if isinstance(manager, BlockCacheManager):  # vLLM's one block pool
        return manager.pool.num_free == 0
    pools = getattr(manager, "pools", {})
    return any(pool.num_free == 0 for pool in pools.values() if pool.size)


def stress(preset: str, num_ops: int, seed: int = 0) -> Counter:
    """``num_ops`` operations, each followed by ``check_integrity()``; raises on the first broken invariant."""
    rng, counts = random.Random(f"{preset}/{seed}"), Counter[str]()
    while counts["ops"] < num_ops:
        manager, chunk = scenario(preset, rng)
        driver = Driver(manager, chunk, rng, counts)
        for _ in range(min(OPS_PER_SCENARIO, num_ops - counts["ops"])):
            driver.operate()
            manager.check_integrity()
        for rid in list(driver.active):
            manager.finish(rid)
            manager.check_integrity()
        assert not manager.requests
        counts["scenarios"] += 1
    return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000, help="operations per preset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--preset", action="append", choices=SOUND_PRESETS, help="repeatable [every sound preset]"
    )
    args = parser.parse_args(argv)
    for preset in args.preset or SOUND_PRESETS:
        started = time.perf_counter()
        counts = stress(preset, args.ops, args.seed)
        elapsed = time.perf_counter() - started
        shown = ", ".join(f"{name} {count}" for name, count in sorted(counts.items()) if name != "ops")
        print(f"{preset:<20} {counts['ops']} operations checked in {elapsed:.0f} s: {shown}", flush=True)


if __name__ == "__main__":
    main()

"""`execute` on every model preset x every policy it can run, on a multi-turn trace: the figures of issue 27.

Each cell runs the preset's real layer pattern (shrunk on a CPU by the rule of executor/shrink.py; the cache
manager runs the full-size preset) and prints the requests checked, those reusing a prefix, the cached tokens
and the requests not bit-exact against a replay from scratch (0 for every sound policy). Policies
`execute` refuses (executor/support.py) are listed as refused; the negative controls (broken-*) are left to
the tests, which check that each is flagged on exactly the requests its fault reaches.

    python scripts/execute_matrix.py [--models a,b] [--policies a,b] [--kernels torch|triton] [--json PATH]

Exits non-zero if any cell is not bit-exact or fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from functools import partial
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any kernel module is imported
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from executor.execute import execute  # noqa: E402
from executor.support import execute_refusal  # noqa: E402
from sim.engines.registry import make_policy, policy_names  # noqa: E402
from sim.models import MODELS  # noqa: E402
from sim.run.simulate import SimConfig  # noqa: E402
from sim.trace.generate import multiturn  # noqa: E402

# second and third turns extend the first: with a 1100-token system prompt every preset's vLLM block
# (528 to 1056 tokens for the GatedDeltaNet models, 16 to 272 for the others) fits under the first prompt
matrix_trace = partial(
    multiturn, num_sessions=2, num_turns=3, system_len=1100, user_len=24, output_len=12, request_rate=20.0
)


def sound_policies() -> list[str]:
    return [name for name in policy_names() if not name.startswith("broken-")]


def run_cell(model: str, policy: str, kernels: str) -> dict:
    refusal = execute_refusal(make_policy(policy))
    if refusal is not None:
        return {"model": model, "policy": policy, "status": "refused", "why": refusal}
    config = SimConfig(policy=policy, model=model, gpu="cpu", pool_tokens=40_000, mamba_states=64)
    started = time.perf_counter()
    try:
        s = execute(matrix_trace(), config, kernels=kernels).summary
    except Exception as err:  # a cell that fails is a finding, not the end of the matrix
        return {"model": model, "policy": policy, "status": "error", "why": f"{type(err).__name__}: {err}"}
    status = "ok" if s["requests_not_bit_exact"] == 0 else "NOT BIT-EXACT"
    keys = (
        "requests_checked",
        "requests_reusing",
        "cached_tokens",
        "requests_not_bit_exact",
        "same_step_state_hits",
    )
    return {
        "model": model,
        "policy": policy,
        "status": status,
        "seconds": round(time.perf_counter() - started, 1),
    } | {k: s[k] for k in keys}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--policies", default=",".join(sound_policies()))
    parser.add_argument("--kernels", default="torch", choices=["torch", "triton"])
    parser.add_argument("--json", help="write every cell here")
    args = parser.parse_args()
    cells = []
    print(
        f"{'model':<18}{'policy':<20}{'status':<15}{'checked':>8}{'reusing':>8}{'cached':>8}{'not exact':>10}{'s':>7}"
    )
    for model in args.models.split(","):
        for policy in args.policies.split(","):
            cell = run_cell(model, policy, args.kernels)
            cells.append(cell)
            figures = [cell.get(k, "") for k in ("requests_checked", "requests_reusing", "cached_tokens")]
            print(
                f"{model:<18}{policy:<20}{cell['status']:<15}{figures[0]:>8}{figures[1]:>8}{figures[2]:>8}"
                f"{cell.get('requests_not_bit_exact', ''):>10}{cell.get('seconds', ''):>7}"
                + (f"  {cell['why'][:90]}" if "why" in cell else ""),
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(cells, indent=1) + "\n")
    bad = [c for c in cells if c["status"] not in ("ok", "refused")]
    print(
        f"{len(cells)} cells: {sum(c['status'] == 'ok' for c in cells)} bit-exact, "
        f"{sum(c['status'] == 'refused' for c in cells)} refused, {len(bad)} failing"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

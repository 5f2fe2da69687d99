#!/usr/bin/env bash
# The executor on a real GPU, in one prepared run (well under 10 minutes on an H200):
#   1. the kernel and bit-exactness tests on CUDA (tests/executor picks the GPU when there is one);
#   2. `execute` with the `small` model on an S1-shaped trace, for a correct and a deliberately broken
#      policy: reuse mismatches, KL, tokens/s, step-time error;
#   3. a calibration fitted from those timings.
# Everything lands in $OUT (or ./gpu-check-out): gpu_check.json sums it up; record it in docs/gpu-runs.md.
# The GPU machine has torch and triton but no simpy: carry its wheel in .whl/ (see docs/executor.md).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check-out}
mkdir -p "$out"
if ! python3 -c "import simpy" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=.:${PYTHONPATH:-} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$out/gpu.txt"

timeout 300 python3 -m pytest -q tests/executor -p no:cacheprovider -m "not slow" ${TEST_ARGS:-} > "$out/tests.log" 2>&1
tests_rc=$?

# a dry run of the plumbing on a CPU: MODEL=tiny DEVICE=cpu PROMPT_LEN=150 OUTPUT_LEN=100 PAGE=16 INTERVAL=32
python3 cli.py trace gen s1 --num-prompts "${NUM_PROMPTS:-4}" --prompt-len "${PROMPT_LEN:-1500}" \
  --output-len "${OUTPUT_LEN:-600}" -o "$out/s1.jsonl"
knobs=(--model "${MODEL:-small}" --device "${DEVICE:-cuda}" --kernels triton --page-size "${PAGE:-64}"
       --track-interval "${INTERVAL:-256}" --swa-eviction-interval "${EVICT:-128}" --pool-tokens 400000
       --mamba-states 512)
timeout 240 python3 cli.py execute --trace "$out/s1.jsonl" --policy sglang-retain "${knobs[@]}" --json \
  --out "$out/retain" > "$out/execute_retain.json" 2> "$out/execute_retain.err"
timeout 240 python3 cli.py execute --trace "$out/s1.jsonl" --policy broken-retain-short "${knobs[@]}" --json \
  > "$out/execute_broken.json" 2> "$out/execute_broken.err"
timeout 120 python3 cli.py calibrate --trace "$out/s1.jsonl" --policy sglang-retain "${knobs[@]}" \
  -o "$out/calibration-${MODEL:-small}-${DEVICE:-cuda}.json" > "$out/calibrate.txt" 2>&1

python3 - "$out" "$tests_rc" <<'PY'
import json, pathlib, sys
out, tests_rc = pathlib.Path(sys.argv[1]), int(sys.argv[2])
def load(name):
    try:
        return json.loads((out / name).read_text())
    except Exception as e:  # keep whatever else ran
        return {"error": f"{name}: {e}"}
summary = {"gpu": (out / "gpu.txt").read_text().strip(), "tests_rc": tests_rc,
           "tests_tail": (out / "tests.log").read_text().strip().splitlines()[-1:] if (out / "tests.log").exists() else [],
           "execute_retain": load("execute_retain.json"), "execute_broken": load("execute_broken.json"),
           "calibrate": (out / "calibrate.txt").read_text().strip() if (out / "calibrate.txt").exists() else None}
(out / "gpu_check.json").write_text(json.dumps(summary, indent=1))
print(json.dumps(summary, indent=1))
PY

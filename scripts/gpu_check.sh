#!/usr/bin/env bash
# The executor on a real GPU in one prepared try; docs/gpu-runs.md says what every figure means.
#
#   bash scripts/gpu_check.sh --prepare    HERE, before the device call: wheel simpy (the one package the GPU
#                                          image lacks) from this environment into .whl/ (git-ignored)
#   bash scripts/gpu_check.sh              THERE, with .whl carried: every stage within its budget (about
#                                          7.5 minutes in all); gpu_check.json rewritten after each stage in $OUT
#   bash scripts/gpu_check.sh --dry-run    on a CPU: the plan with budgets, then every stage at tiny sizes
#   bash scripts/gpu_check.sh --plan       the plan only
#
# Exits non-zero when any stage fails or overruns its budget. PYTHON picks the interpreter [python3].
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
case "${1:-}" in
  --prepare) exec "$python" scripts/wheel_from_env.py simpy -d .whl ;;
  --plan) exec "$python" scripts/gpu_check.py plan ;;
  --dry-run) shift; exec "$python" scripts/gpu_check.py dry-run "$@" ;;
  "") exec "$python" scripts/gpu_check.py run ;;
  *) echo "usage: bash scripts/gpu_check.sh [--prepare | --plan | --dry-run [--out DIR]]" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# The device image's Python stack on a CPU, as close as the package registries allow (docs/gpu-runs.md):
#
#   1. Python 3.12 with numpy 2.5 (the device's 3.12 and numpy 2.5.2): the project installs without its
#      executor extra and passes every test that needs no torch (the simulator, commands, reports).
#   2. torch 2.11 has no CPU build for Python 3.12 on PyPI (only the CUDA 13 build, which pulls several GB of
#      nvidia packages) and numpy 2.5 needs Python >= 3.12, so the executor's tests run on the nearest stack:
#      Python 3.11, torch 2.13 CPU, triton 3.6 (the device's) and numpy 2.4 (the newest for 3.11: >= 2.4 is
#      what broke triton 3.6's interpreter, executor/kernels/interpret_compat.py).
#
#   bash scripts/device_env_check.sh [WORKDIR]      (about ten minutes; exits non-zero on any failure)
#
# PY312 / PY311 pick the interpreters [python3.12 / python3.11].
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-${TMPDIR:-/tmp}/hybridcache-device-env}
py312=${PY312:-python3.12}
py311=${PY311:-python3.11}
mkdir -p "$work"

echo "== 1. Python 3.12 + numpy 2.5: everything but the executor"
"$py312" -m venv --clear "$work/py312"
"$work/py312/bin/pip" install -q "numpy==2.5.2" simpy pandas matplotlib click rich pytest hypothesis zstandard pyarrow
"$work/py312/bin/pip" install -q --no-deps -e .
"$work/py312/bin/python" -c "import sys, numpy; print('python', sys.version.split()[0], 'numpy', numpy.__version__)"
"$work/py312/bin/python" -m pytest -q -p no:cacheprovider -x tests --ignore=tests/executor --ignore=tests/conformance \
  --deselect tests/test_style.py  # ruff and mypy are the 3.11 CI's

echo "== 2. Python 3.11 + torch 2.13 CPU + triton 3.6 + numpy 2.4: the executor's tests"
"$py311" -m venv --clear "$work/py311"
"$work/py311/bin/pip" install -q "torch==2.13.0+cpu" "triton==3.6.0" "numpy>=2.4,<2.5" simpy pandas matplotlib click \
  rich pytest hypothesis pytest-xdist
"$work/py311/bin/pip" install -q --no-deps -e .
"$work/py311/bin/python" -c "import sys, numpy, torch, triton; print('python', sys.version.split()[0], 'numpy', \
numpy.__version__, 'torch', torch.__version__, 'triton', triton.__version__)"
"$work/py311/bin/python" -m pytest -q -p no:cacheprovider tests/executor --ignore=tests/executor/test_executor_gpu_check.py

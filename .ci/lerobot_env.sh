#!/usr/bin/env bash
# Builds the separate virtualenv for the `lerobot`-marked tests and bench/lerobot_read.py.
#
# lerobot 0.4.4 (the newest release for Python 3.11) pins torch<2.11, while robotrl pins
# torch==2.13, so the two cannot share an environment. This venv gets lerobot with its own
# torch, then robotrl on top *without* its dependencies (keeping lerobot's torch), then the
# few runtime dependencies of robotrl.datasets that lerobot does not bring (zarr).
#
#   .ci/lerobot_env.sh [VENV_DIR]          # default /work/.venv-lerobot; safe to re-run
#   VENV_DIR/bin/python -m pytest -m lerobot tests/test_lerobot_format.py
#
# Measured here: ~95 s from local wheels, 8.3 GB (torch's CUDA wheels are most of it).
# torchcodec installs but cannot load without system FFmpeg libraries, so the tests ask
# LeRobotDataset for video_backend="pyav".
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-/work/.venv-lerobot}
LEROBOT_VERSION=0.4.4

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py="$venv/bin/python"
if [ "$("$py" -m pip show lerobot 2>/dev/null | awk '/^Version:/ {print $2}')" != "$LEROBOT_VERSION" ]; then
  "$py" -m pip install -q "lerobot==$LEROBOT_VERSION"
fi
# Freeze what lerobot resolved so nothing below can move torch or numpy.
pins=$(mktemp)
trap 'rm -f "$pins"' EXIT
"$py" -m pip freeze | grep -iE '^(torch|torchvision|torchcodec|numpy|pyarrow)==' > "$pins"
"$py" -m pip install -q --no-deps -e "$repo"
# mujoco + gymnasium: the sim, for rollouts of LeRobotPolicyAdapter (tests/test_lerobot_adapter.py)
"$py" -m pip install -q -c "$pins" "zarr>=3.1" "pyarrow>=21" "pytest>=8" "mujoco>=3.2" "gymnasium>=1.0"
"$py" - <<'EOF'
import lerobot.datasets.lerobot_dataset  # noqa: F401
import torch
import zarr  # noqa: F401

import robotrl.datasets.lerobot_format  # noqa: F401

print(f"lerobot env ready: torch {torch.__version__}")
EOF

#!/usr/bin/env bash
# Builds the virtualenv for the `maniskill`-marked tests (tests/test_maniskill_env.py).
#
# mani-skill 3.0.1 accepts our torch==2.13, but it brings opencv-python (next to our
# opencv-python-headless: both provide cv2), scipy, sapien and ~40 more packages, so it gets
# its own venv that *sees* the main one through a .pth file (torch, mujoco, robotrl's deps are
# not installed twice). Measured here: 53 s, from the package index mirror.
#
#   .ci/maniskill_env.sh [VENV_DIR] [BASE_VENV]   # defaults /work/.venv-maniskill, /work/.venv
#   VENV_DIR/bin/python -m pytest -m maniskill tests/test_maniskill_env.py
set -euo pipefail
venv=${1:-/work/.venv-maniskill}
base=${2:-/work/.venv}
[ -x "$venv/bin/python" ] || "$base/bin/python" -m venv "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$base/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/robotrl_base.pth"
"$venv/bin/python" -m pip install -q "mani-skill==3.0.1"
"$venv/bin/python" -c 'import torch; assert torch.__version__.startswith("2.13"), torch.__version__'

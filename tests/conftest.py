"""Shared pytest setup: offscreen rendering on CPU, no hub access, deterministic threads."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "2")
# idle OpenMP workers spin briefly, then sleep: tests that start processes share the cores
os.environ.setdefault("GOMP_SPINCOUNT", "3000")

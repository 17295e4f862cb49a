"""Test helper (not a test module): expert reach demos and a tiny BC checkpoint on them, made
in seconds, for the tests of the commands that start from a checkpoint, and ``robotrl eval`` of
what those commands write."""

from pathlib import Path

from robotrl.cli import compose
from robotrl.commands.collect import run_collect
from robotrl.commands.eval import run_eval
from robotrl.commands.train_bc import run_train_bc


def reach_demos(root: Path, episodes: int = 3) -> Path:
    """``root/reach.zarr`` with ``episodes`` expert episodes of ``reach``."""
    store = root / "reach.zarr"
    args = ["task=reach", "device=expert", f"episodes={episodes}", f"out={store}", "viewer=off"]
    run_collect(compose("collect", args))
    return store


def tiny_checkpoint(root: Path, store: Path, *overrides: str) -> str:
    """A width-32 flow BC checkpoint (10 steps, no evaluation) on ``store``; ``overrides``
    are further ``robotrl train-bc`` options (later ones win)."""
    args = [f"dataset={store}", "steps=10", "batch_size=16", "eval_episodes=0", "hidden=32"]
    args += [f"output_dir={root}", "progress=false", *overrides]
    return run_train_bc(compose("train_bc", args))["checkpoint"]


def evaluate_checkpoint(checkpoint: str, root: Path, episodes: int = 2) -> dict:
    """``robotrl eval checkpoint=<checkpoint>`` on ``episodes`` episodes, no videos: its JSON."""
    args = [f"checkpoint={checkpoint}", f"episodes={episodes}", "videos=0", f"output_dir={root}"]
    return run_eval(compose("eval", [*args, "progress=false"]))

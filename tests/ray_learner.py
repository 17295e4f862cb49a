"""Test helpers for the Ray actor/learner split: a learner served in a background thread of
the test process, a delivery log the learner writes before each acknowledgement, and Ray
clusters started the way a two-machine one is."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np


class Collect:
    """A learner that keeps nothing but counts: one update owed per batch; weights =
    ``{"w": transitions taken}``."""

    def __init__(self) -> None:
        self.n = self.owed = 0

    def on_transitions(self, batch: Any) -> None:
        self.n += len(batch)
        self.owed += 1

    def work(self, max_updates: int = 4) -> int:
        done = min(max_updates, self.owed)
        self.owed -= done
        return done

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"w": np.full(3, self.n, np.float32)}


class DeliveryLog:
    """``on_delivery`` hook: one JSON line per delivered batch (actor, epoch, seq, n and the
    first value of each row's ``obs/x``), appended before the acknowledgement."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)

    def __call__(self, batch: Any) -> None:
        xs = [float(v) for v in batch.obs["x"][:, 0]] if "x" in batch.obs else []
        row = {"a": batch.actor_id, "e": batch.epoch, "s": batch.seq, "n": len(batch), "x": xs}
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")

    def unique(self) -> dict[tuple[str, int, int], dict[str, Any]]:
        """Delivered batches by (actor, epoch, seq); a batch delivered twice (across a learner
        restart) counts once."""
        if not Path(self.path).is_file():
            return {}
        rows = [json.loads(line) for line in Path(self.path).read_text().splitlines()]
        return {(r["a"], r["e"], r["s"]): r for r in rows}


def served(
    make_learner: Callable[[], Any], name: str, state_dir: Path, **kw: Any
) -> contextlib.AbstractContextManager[dict[str, Any]]:
    """:func:`~robotrl.distributed.learner_service.serving` with the tests' settings (no torch
    thread setting in the learner, a 0.1 s liveness poll)."""
    from robotrl.distributed.learner_service import serving

    return serving(
        make_learner, name=name, state_dir=state_dir, poll_s=0.1, **{"threads": None, **kw}
    )


def ray_cli(*args: str, env: dict[str, str] | None = None) -> str:
    """Run the ``ray`` command line of this interpreter's environment; its stdout."""
    ray = str(Path(sys.executable).with_name("ray"))
    out = subprocess.run(
        [ray, *args], capture_output=True, text=True, timeout=180, env=env or os.environ.copy()
    )
    if out.returncode != 0:
        raise RuntimeError(f"ray {' '.join(args)} failed: {out.stderr[-2000:]}")
    return out.stdout


@contextlib.contextmanager
def two_node_cluster(port: int) -> Iterator[str]:
    """A head node (``ray start --head``) and a second node that joins it (``ray start
    --address``), as on a GPU box and a robot PC; yields the address to join. Stopped after."""
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
    address = f"127.0.0.1:{port}"
    before = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "token"  # for the processes that join it
    try:
        ray_cli(
            "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
            "--include-dashboard=false", "--disable-usage-stats", env=env,
        )  # fmt: skip
        ray_cli("start", f"--address={address}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                env=env)  # fmt: skip
        yield address
    finally:
        ray_cli("stop", "--force", env=env)
        if before is None:
            del os.environ["RAY_AUTH_MODE"]
        else:
            os.environ["RAY_AUTH_MODE"] = before

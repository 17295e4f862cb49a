"""Fingerprints of env trajectories, to show that a refactor left the simulation unchanged.

Each case runs one env (task, backend, controller, safety mode) for 120 steps of seeded random
actions (resets included) and hashes every observation array and reward. Run it from two trees
(e.g. a ``git worktree`` of the commit before) and compare the JSON lines: equal hashes mean
bit-identical trajectories.

    python bench/trace_envs.py            # finite actions only
    python bench/trace_envs.py nan=1      # every 37th action NaN (the hold path too)
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this tree's packages; reflex_weights

import sim  # noqa: E402

CASES = (  # task, backend, controller, safety
    ("lift", "mujoco", "native", "filter"),
    ("lift", "mujoco", "impedance", "filter"),
    ("peg_insert", "mujoco", "native", "filter"),
    ("peg_insert", "mujoco", "impedance", "monitor"),
    ("peg_insert", "mujoco", "native", "reflex"),
    ("reach", "mujoco", "osc", "filter"),
    ("lift", "pybullet", "impedance", "filter"),
)


def fingerprint(env, steps: int, nan: bool) -> str:
    h = hashlib.sha256()
    rng = np.random.default_rng(0)
    env.reset(seed=11)
    for t in range(steps):
        a = np.full(7, np.nan) if nan and t % 37 == 36 else rng.uniform(-1, 1, 7)
        obs, reward, term, trunc, _ = env.step(a)
        for key in sorted(obs):
            h.update(np.ascontiguousarray(obs[key]).tobytes())
        h.update(np.float64(reward).tobytes())
        if term or trunc:
            env.reset(seed=12 + t)
    return h.hexdigest()[:16]


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    nan, steps = args.get("nan", "0") == "1", int(args.get("steps", 120))
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        from reflex_weights import pushing_down_low_critic

        critic = Path(tmp) / "critic.npz"
        np.savez(critic, **pushing_down_low_critic(z_limit=0.16))
        for task, backend, controller, safety in CASES:
            kw: dict = {"controller": controller}
            if backend == "mujoco":
                kw["safety"] = safety
                if safety == "reflex":
                    kw["safety_kwargs"] = {"critic": str(critic)}
            env = sim.make(task, backend=backend, **kw)
            out[f"{task}/{backend}/{controller}/{safety}"] = fingerprint(env, steps, nan)
            env.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])

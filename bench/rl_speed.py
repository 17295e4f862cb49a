"""Residual RL speed on lift: env steps/s of a training run, updates included; prints JSON.

Usage: python bench/rl_speed.py [steps=1500] [reps=2] [threads=2]

Each variant trains a residual on a fresh flow base of the BC default size (weights do not change
the cost) for ``steps`` env steps after a 200-step warm-up, in a fresh process, with ``threads``
torch threads; variants run round-robin ``reps`` times and the best rate is kept (other load only
slows a measurement down). Variants:

- ``default``: ``ResidualConfig()`` (what ``robotrl train-rl`` runs);
- ``before``: the default until 2026-11-26 (critics 256 wide, batch 256, UTD 4);
- ``dsrl``: ``DSRLConfig()`` on the same base (``algo=dsrl``).

``speedup`` is ``default`` over ``before``, measured in the same run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

WORKLOAD = r"""
import sys, time, numpy as np, torch
import sim
from policies.flow_matching import FlowMatchingPolicy
from robotrl.algos.residual import ResidualConfig, StateFeaturizer
variant, steps, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
keys = ["state/ee_pos", "state/ee_quat", "state/gripper", "state/cube_pos", "state/cube_quat",
        "state/joint_pos"]
env = sim.make("lift")
obs, _ = env.reset(seed=0)
dims = {k: int(np.asarray(obs[k]).size) for k in keys}
env.close()
base = FlowMatchingPolicy(dims, num_steps=10)
stats = {k: {"mean": np.zeros(d), "std": np.ones(d)} for k, d in dims.items()}
feat = StateFeaturizer(keys, stats)
warm = 200
if variant == "dsrl":
    from robotrl.algos.dsrl import DSRLConfig
    from robotrl.algos.dsrl_training import DSRLTrainConfig, train_dsrl
    train = DSRLTrainConfig(total_steps=warm + steps, warmup_steps=warm, eval_every=10**9,
                            eval_episodes=1)
    res = train_dsrl(base, lambda: sim.make("lift"), feat, DSRLConfig(), train, progress=False)
else:
    from robotrl.algos.residual_training import TrainConfig, train_residual
    cfg = ResidualConfig() if variant == "default" else ResidualConfig(
        hidden=256, batch_size=256, utd=4)
    train = TrainConfig(total_steps=warm + steps, warmup_steps=warm, critic_warmup_updates=0,
                        eval_every=10**9, eval_episodes=1)
    res = train_residual(base, lambda: sim.make("lift"), feat, cfg, train, progress=False)
# the first evaluation (one episode of the base) is in wall_s; it is the same for all variants
print(res.env_steps / res.wall_s)
"""

VARIANTS = ("default", "before", "dsrl")


def main(argv: list[str]) -> dict[str, object]:
    args = {"steps": "1500", "reps": "2", "threads": "2"}
    for a in argv:
        k, _, v = a.partition("=")
        if k not in args:
            raise SystemExit(f"unknown argument {k!r}; expected one of {sorted(args)}")
        args[k] = v
    env = {**os.environ, "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT", "3000")}
    best: dict[str, float] = {}
    for _ in range(int(args["reps"])):
        for v in VARIANTS:
            cmd = [sys.executable, "-c", WORKLOAD, v, args["steps"], args["threads"]]
            out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
            best[v] = max(best.get(v, 0.0), float(out.stdout.strip().splitlines()[-1]))
    return {
        "env_steps_per_s": {k: round(x, 1) for k, x in best.items()},
        "speedup_default_over_before": round(best["default"] / best["before"], 2),
        "steps": int(args["steps"]),
        "threads": int(args["threads"]),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

"""MuJoCo -> PyBullet transfer table: a BC checkpoint trained in MuJoCo, evaluated in MuJoCo and
in PyBullet (the transfer gap), and a residual RL checkpoint trained in PyBullet on top of it;
same held-out seeds for every row; prints JSON.

Usage: python bench/sim_transfer.py bc=<train-bc checkpoint> [residual=<train-rl checkpoint>]
       [episodes=50] [seed=100000]

The residual checkpoint comes from ``robotrl train-rl checkpoint=<bc> backend=pybullet ...``
(its env steps and wall time are in that command's JSON line). In PyBullet the checkpoint's
``native`` controller becomes the numpy impedance controller (``policy_env.with_backend``);
the MuJoCo row is measured with both.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import sim
from policies.checkpoint import execute_horizon, load_policy
from robotrl.algos.residual import StateFeaturizer, load_agent
from robotrl.algos.residual_training import evaluate_residual
from robotrl.evaluation import wilson_interval
from robotrl.policy_env import env_kwargs, rollout_policy, with_backend


def _bc_row(policy: Any, task: str, kw: dict, episodes: int, seed: int, te: int) -> dict:
    start = time.perf_counter()
    res = rollout_policy(
        policy, task, kw, episodes=episodes, execute_horizon=te, seed=seed, progress=False
    )
    return {**res.summary(), "wall_s": round(time.perf_counter() - start, 1)}


def main(argv: list[str]) -> dict[str, Any]:
    args = dict(a.split("=", 1) for a in argv)
    episodes, seed = int(args.get("episodes", 50)), int(args.get("seed", 100000))
    policy: Any
    policy, meta = load_policy(args["bc"])
    task = meta["task"]
    te = execute_horizon(meta, policy.action_horizon)
    kw = env_kwargs(meta)
    out: dict[str, Any] = {"task": task, "episodes": episodes, "seed": seed}
    out["mujoco_bc"] = _bc_row(policy, task, kw, episodes, seed, te)
    out["mujoco_bc_numpy_impedance"] = _bc_row(
        policy, task, {**kw, "controller": "impedance"}, episodes, seed, te
    )
    out["pybullet_bc"] = _bc_row(policy, task, with_backend(kw, "pybullet"), episodes, seed, te)
    if "residual" in args:
        agent, rmeta = load_agent(args["residual"])
        feat = StateFeaturizer(rmeta["obs_keys"], rmeta["featurizer"])
        start = time.perf_counter()
        ev = evaluate_residual(
            agent,
            policy,
            feat,
            lambda: sim.make(task, **with_backend(kw, "pybullet")),
            episodes,
            seed,
            te,
        )
        wins = round(ev["success_rate"] * episodes)
        out["pybullet_bc_residual"] = {
            **ev,
            "success_ci95": [round(x, 4) for x in wilson_interval(wins, episodes)],
            "wall_s": round(time.perf_counter() - start, 1),
        }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

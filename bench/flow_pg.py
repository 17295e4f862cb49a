"""Flow policy-gradient throughput: rollout env steps/s (policy inference included) vs num_envs,
against random-action stepping of the same vector env measured in the same run, and the
learner's update time per batch. Prints JSON.

Usage: python bench/flow_pg.py [task=lift] [num_envs=1,2,4] [steps=2000] [reps=2]
    [checkpoint=<flow ckpt>]

Each configuration is measured ``reps`` times round-robin and the best rate is kept (other
jobs on a shared machine only ever slow a measurement down).

Without a checkpoint a fresh flow policy of the BC default size is used (hidden 256, depth 3,
To 2, Ta 16, Te 8); weights do not change the cost. K = 4 as in the RL runs.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

import sim
from policies.checkpoint import load_policy
from policies.flow_matching import FlowMatchingPolicy
from robotrl.algos.flow_pg import FlowPG, FlowPGConfig
from robotrl.algos.flow_rollout import FlowRollout
from robotrl.benchmarks.sim_throughput import vec_env_steps_per_second

LIFT_KEYS = [
    "state/ee_pos",
    "state/ee_quat",
    "state/gripper",
    "state/cube_pos",
    "state/cube_quat",
    "state/joint_pos",
]


def _args(argv: list[str]) -> dict[str, str]:
    out = {"task": "lift", "num_envs": "1,2,4", "steps": "2000", "checkpoint": "", "reps": "2"}
    for a in argv:
        k, _, v = a.partition("=")
        if k not in out:
            raise SystemExit(f"unknown argument {k!r}; expected one of {sorted(out)}")
        out[k] = v
    return out


def _policy(task: str, checkpoint: str) -> FlowMatchingPolicy:
    if checkpoint:
        policy, _ = load_policy(checkpoint)
    else:
        env = sim.make(task)
        obs, _ = env.reset(seed=0)
        env.close()
        keys = [k for k in LIFT_KEYS if k in obs] or [k for k in obs if k.startswith("state/")]
        policy = FlowMatchingPolicy({k: int(np.asarray(obs[k]).size) for k in keys})
    policy.num_steps = 4
    return policy.eval()


def main(argv: list[str]) -> dict:
    torch.set_num_threads(1)
    a = _args(argv)
    task, steps = a["task"], int(a["steps"])
    policy = _policy(task, a["checkpoint"])
    ns = [int(x) for x in a["num_envs"].split(",")]
    best: dict[int, dict[str, float]] = {n: {"rollout": 0.0, "random": 0.0} for n in ns}
    batch = None
    for rep in range(int(a["reps"])):  # round-robin: load changes on a shared machine hit all n
        for n in ns:
            venv = sim.make_vec(task, n)
            random_sps = vec_env_steps_per_second(venv, max(steps // n, 1), seed=rep)
            venv.close()
            venv = sim.make_vec(task, n, autoreset_mode=AutoresetMode.DISABLED)
            rollout = FlowRollout(policy, venv, "sde", execute_horizon=8, seed=rep)
            rollout.collect(10 * n)  # warm up worker processes
            t0 = time.perf_counter()
            start = rollout.env_steps
            groups = rollout.collect(steps)
            sps = (rollout.env_steps - start) / (time.perf_counter() - t0)
            rollout.close()
            best[n]["rollout"] = max(best[n]["rollout"], sps)
            best[n]["random"] = max(best[n]["random"], random_sps)
            batch = batch or groups
            print(
                json.dumps({"rep": rep, "num_envs": n, "rollout": sps, "random": random_sps}),
                file=sys.stderr,
                flush=True,
            )
    rows = [
        {
            "num_envs": n,
            "rollout_env_steps_per_s": round(best[n]["rollout"], 1),
            "random_action_env_steps_per_s": round(best[n]["random"], 1),
            "ratio_to_random_actions": round(best[n]["rollout"] / best[n]["random"], 3),
        }
        for n in ns
    ]
    base = rows[0]["rollout_env_steps_per_s"]
    for r in rows:
        r["speedup_vs_1_env"] = round(r["rollout_env_steps_per_s"] / base, 3)
    updates = {}
    for algo in ("flow_noise", "flow_sde"):
        cfg = FlowPGConfig(  # every update trains the actor too
            algo=algo, num_steps=4, epochs=4, minibatch_size=128, critic_warmup_iters=0
        )
        feat_dim = int(batch[0][0].steps[0].features.shape[0])
        learner = FlowPG(policy, feat_dim, cfg)
        b = learner.make_batch(batch)
        t0 = time.perf_counter()
        learner.update(b)
        dt = time.perf_counter() - t0
        chunks = len(b["advantage"])
        updates[algo] = {
            "batch_chunk_steps": chunks,
            "epochs": cfg.epochs,
            "minibatch": cfg.minibatch_size,
            "update_s": round(dt, 3),
            "ms_per_chunk_step_epoch": round(1000 * dt / (chunks * cfg.epochs), 3),
        }
    return {
        "bench": "flow_pg",
        "task": task,
        "K": policy.num_steps,
        "Ta": policy.action_horizon,
        "Te": 8,
        "params": sum(p.numel() for p in policy.parameters()),
        "rollout": rows,
        "learner_update": updates,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

"""Where does a lift policy fail, and would a constant correction fix it? Prints JSON.

Usage: python bench/grasp_failures.py checkpoint=<train-bc or train-rl checkpoint>
    [episodes=100] [seed=200000] [offsets=false] [noise_scale=<a base: 0; a residual: its own>]

Classifies each episode ``seed + i`` by :mod:`robotrl.benchmarks.grasp_failures` (success,
lifted short of 10 cm, gripper closed beside the cube, above it, at it, never closed). With
``offsets=true`` every failed episode is replayed with 18 constant action offsets (8 horizontal
directions at 0.03 and 0.06 action units per step, and down at each) and counted as fixed when
one of them succeeds.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

import sim
from policies.registry import set_noise_scale
from robotrl.benchmarks.arguments import key_values
from robotrl.benchmarks.grasp_failures import constant_offsets, grasp_failures
from robotrl.chunk_runner import as_episode_policy
from robotrl.commands.eval import load_checkpoint
from robotrl.policy_env import env_kwargs


def main(argv: list[str]) -> dict[str, Any]:
    args = key_values(
        argv,
        {"checkpoint": "", "episodes": "100", "seed": "200000", "offsets": "false",
         "noise_scale": ""},
        __doc__,
        required="checkpoint",
    )  # fmt: skip
    torch.set_num_threads(1)
    policy, model, meta, te = load_checkpoint(args["checkpoint"])
    if model is policy:  # a train-bc base: run it as the residual runs it, from its mean noise
        set_noise_scale(model, 0.0)
    if args["noise_scale"]:
        set_noise_scale(model, float(args["noise_scale"]), "noise_scale")
    if meta.get("task") != "lift":
        raise SystemExit(
            f"the grasp failure modes are lift's; the checkpoint's task is {meta.get('task')}"
        )
    env = sim.make("lift", **env_kwargs(meta))
    n, seed = int(args["episodes"]), int(args["seed"])
    offsets = constant_offsets(7) if args["offsets"].lower() == "true" else None
    with torch.no_grad():
        out = grasp_failures(
            env, as_episode_policy(policy, te), episodes=n, seed=seed, offsets=offsets
        )
    env.close()
    return {"checkpoint": args["checkpoint"], "episodes": n, "seed": seed, **out}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

"""Where does a lift policy fail, and would a constant correction fix it? Prints JSON.

Usage: python bench/grasp_failures.py checkpoint=<train-bc or train-rl checkpoint>
    [episodes=100] [seed=200000] [offsets=false] [expert_rotation=false] [rotation_bound=inf]
    [noise_scale=<a base: 0; a residual: its own>]

Classifies each episode ``seed + i`` by :mod:`robotrl.benchmarks.grasp_failures` (success,
lifted short of 10 cm, gripper closed beside the cube, above it, at it, never closed) and
reports how the gripper stood at its first closing, for the successes and the failures apart
(``closing``: yaw off the cube's face and tilt [deg], x-y offset and height [mm]). With
``offsets=true`` every failed episode is replayed with 18 constant action offsets (8 horizontal
directions at 0.03 and 0.06 action units per step, and down at each) and counted as fixed when
one of them succeeds. With ``expert_rotation=true`` the scripted expert's rotation actions
replace the policy's (``rotation_bound=<b>``: move them towards the expert's by at most ``b``
action units per entry, a residual's bound): what a gripper oriented to the cube would add.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

import sim
from policies.registry import set_noise_scale
from robotrl.benchmarks.arguments import key_values
from robotrl.benchmarks.expert_rotation import RotationFix
from robotrl.benchmarks.grasp_failures import constant_offsets, grasp_failures
from robotrl.chunk_runner import as_episode_policy
from robotrl.commands.eval import load_checkpoint
from robotrl.policy_env import env_kwargs


def policy_and_env(checkpoint: str, noise_scale: str, task: str) -> tuple[Any, Any]:
    """The checkpoint's policy as an episode policy (a train-bc base from its mean noise, as the
    residual runs it; ``noise_scale``, when not empty, overrides the scale) and an env of
    ``task``, which must be the checkpoint's, on one torch thread."""
    torch.set_num_threads(1)
    policy, model, meta, te = load_checkpoint(checkpoint)
    if model is policy:  # a train-bc base: run it as the residual runs it, from its mean noise
        set_noise_scale(model, 0.0)
    if noise_scale:
        set_noise_scale(model, float(noise_scale), "noise_scale")
    if meta.get("task") != task:
        raise SystemExit(
            f"these failure modes are {task}'s; the checkpoint's task is {meta.get('task')}"
        )
    return as_episode_policy(policy, te), sim.make(task, **env_kwargs(meta))


def main(argv: list[str]) -> dict[str, Any]:
    args = key_values(
        argv,
        {"checkpoint": "", "episodes": "100", "seed": "200000", "offsets": "false",
         "noise_scale": "", "expert_rotation": "false", "rotation_bound": "inf"},
        __doc__,
        required="checkpoint",
    )  # fmt: skip
    policy, env = policy_and_env(args["checkpoint"], args["noise_scale"], "lift")
    n, seed = int(args["episodes"]), int(args["seed"])
    offsets = constant_offsets(7) if args["offsets"].lower() == "true" else None
    bound = float(args["rotation_bound"])
    rotation = RotationFix(bound) if args["expert_rotation"].lower() == "true" else None
    with torch.no_grad():
        out = grasp_failures(env, policy, episodes=n, seed=seed, offsets=offsets, rotation=rotation)
    env.close()
    fix = None if rotation is None else {"rotation_bound": bound}
    return {"checkpoint": args["checkpoint"], "episodes": n, "seed": seed,
            "expert_rotation": fix, **out}  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

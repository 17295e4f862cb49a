"""Where does a peg_insert policy fail, and what does noise on its approach cost? Prints JSON.

Usage: python bench/peg_failures.py checkpoint=<train-bc or train-rl checkpoint>
    [episodes=100] [seed=200000] [noise_std=0] [noise_steps=30] [servo_gain=0]
    [expert_rotation=false] [noise_scale=<a base: 0; a residual: its own>]

Classifies each episode ``seed + i`` by :mod:`robotrl.benchmarks.peg_failures` (success, touched
down aligned but not in, touched down off the hole's centre, never touched down) and reports the
touchdown's horizontal error [mm] of successes and failures. With ``noise_std`` > 0 the first
``noise_steps`` actions of every episode get independent per-step noise of that std [action
units] on translation and rotation: the success left shows what exploring the approach alone
costs the policy. With ``servo_gain`` > 0 a scripted residual corrects x and y by that fraction
of the peg tip's offset from the hole's centre per step, near the block and within the residual's
default bound: what a residual that aims would reach. With ``expert_rotation=true`` the
scripted expert's rotation actions replace the policy's: what an exact orientation would add.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

import torch
from grasp_failures import policy_and_env  # bench/: run as python bench/peg_failures.py

from robotrl.benchmarks.arguments import key_values
from robotrl.benchmarks.peg_failures import Perturbation, peg_failures


def main(argv: list[str]) -> dict[str, Any]:
    args = key_values(
        argv,
        {"checkpoint": "", "episodes": "100", "seed": "200000", "noise_std": "0",
         "noise_steps": "30", "noise_scale": "", "servo_gain": "0",
         "expert_rotation": "false"},
        __doc__,
        required="checkpoint",
    )  # fmt: skip
    policy, env = policy_and_env(args["checkpoint"], args["noise_scale"], "peg_insert")
    n, seed = int(args["episodes"]), int(args["seed"])
    change = Perturbation(
        float(args["noise_std"]), int(args["noise_steps"]), float(args["servo_gain"]),
        args["expert_rotation"].lower() == "true",
    )  # fmt: skip
    with torch.no_grad():
        out = peg_failures(env, policy, episodes=n, seed=seed, change=change)
    env.close()
    return {"checkpoint": args["checkpoint"], "episodes": n, "seed": seed, **asdict(change),
            **out}  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

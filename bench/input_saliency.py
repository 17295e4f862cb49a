"""Which inputs does a trained residual read? Prints JSON.

Usage: python bench/input_saliency.py checkpoint=<train-rl residual checkpoint>
    [episodes=20] [seed=200000] [step=0.1]

Runs the residual (``algo=residual``, ``residual_ppo``, ``potential`` or ``rlpd``) on its base,
deterministically, for ``episodes`` episodes from ``seed``, and reports each input key's share
of how much the residual's correction moves with its inputs over those episodes' states
(:mod:`robotrl.benchmarks.input_saliency`: one entry at a time moved by ``step`` of its
spread), largest first, with the episodes' success and the number of steps read.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

import sim
from robotrl.algos.residual_policy import is_residual_checkpoint
from robotrl.benchmarks.arguments import key_values
from robotrl.benchmarks.input_saliency import (
    input_names,
    input_sensitivity,
    input_shares,
    record_inputs,
)
from robotrl.commands.eval import load_checkpoint
from robotrl.policy_env import env_kwargs


def main(argv: list[str]) -> dict[str, Any]:
    args = key_values(
        argv,
        {"checkpoint": "", "episodes": "20", "seed": "200000", "step": "0.1"},
        __doc__,
        required="checkpoint",
    )
    if not is_residual_checkpoint(args["checkpoint"]):
        raise SystemExit(f"{args['checkpoint']} is not a train-rl residual checkpoint")
    torch.set_num_threads(1)
    policy, _, meta, _ = load_checkpoint(args["checkpoint"])
    env = sim.make(meta["task"], **env_kwargs(meta))
    n, seed = int(args["episodes"]), int(args["seed"])
    with torch.no_grad():
        obs, base, result = record_inputs(policy, env, n, seed=seed, progress=True)
        sensitivity = input_sensitivity(policy.agent, obs, base, float(args["step"]))
    env.close()
    shares = input_shares(sensitivity, input_names(policy.featurizer, base.shape[1]))
    return {"checkpoint": args["checkpoint"], "episodes": n, "seed": seed,
            "success": result.success_rate,
            "steps": len(obs), "shares": {k: round(v, 3) for k, v in shares.items()}}  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

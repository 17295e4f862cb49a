"""Do a residual run's critics rank actions? Prints JSON.

Usage: python bench/critic_ranking.py checkpoint=<train-rl residual checkpoint> [episodes=100]
    [seed=200000] [candidates=16] [sigmas=0.02,0.05] [noise_scale=<the checkpoint's>]

Runs the checkpoint's policy (its base plus the deterministic residual) on episodes
``seed + i``, then again with ``candidates`` residuals to choose from at every step, for each
sigma and each rule of :mod:`robotrl.benchmarks.critic_ranking` (``random``, ``critic``).
Where the critics know which actions are better, ``critic`` beats ``random`` at the same sigma;
where they do not, a residual that follows their gradient can only gain what that gradient
averages to over many states. ``noise_scale`` overrides the base's sampler noise scale, as
``robotrl eval noise_scale=`` does (for runs written before checkpoints recorded it).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

from policies.registry import set_noise_scale
from robotrl.algos.residual_policy import load_residual_policy
from robotrl.benchmarks.arguments import key_values
from robotrl.benchmarks.critic_ranking import critic_ranking
from robotrl.policy_env import env_kwargs


def main(argv: list[str]) -> dict[str, Any]:
    args = key_values(
        argv,
        {
            "checkpoint": "",
            "episodes": "100",
            "seed": "200000",
            "candidates": "16",
            "sigmas": "0.02,0.05",
            "noise_scale": "",
        },
        __doc__,
        required="checkpoint",
    )
    torch.set_num_threads(1)
    policy, meta = load_residual_policy(args["checkpoint"])
    if args["noise_scale"]:
        set_noise_scale(policy.base, float(args["noise_scale"]), "noise_scale")
    n, seed, k = int(args["episodes"]), int(args["seed"]), int(args["candidates"])
    rates = critic_ranking(
        policy, meta["task"], env_kwargs(meta), episodes=n, seed=seed, candidates=k,
        sigmas=[float(s) for s in args["sigmas"].split(",")],
    )  # fmt: skip
    return {"checkpoint": args["checkpoint"], "episodes": n, "seed": seed, "candidates": k,
            **rates}  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

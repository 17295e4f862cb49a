"""Policy iteration on a learnt success potential: does a peg_insert base's own data hold the
correction it lacks? Prints one JSON line per iteration.

Usage: python bench/success_potential.py checkpoint=<train-bc checkpoint> [seed=0]
    [iterations=4] [base_episodes=200] [episodes_per_iteration=150] [eval_episodes=100]
    [noise_std=0.005] [bound=0.05] [kappa=0.02]

The base runs from its mean noise. Its rollouts (independent noise of ``noise_std`` action units
on every action) train a classifier of their episodes' success, Φ; the next policy is the base
plus the x-y corrections of an actor fitted to Φ (:mod:`robotrl.algos.success_potential`),
evaluated on ``eval_episodes`` episodes from seed 200 000; it is rolled out in turn, Φ refitted
on all the episodes so far, and so on. ``env_steps``: the rollouts' steps Φ was fitted on.
``robotrl train-rl algo=potential`` runs the same loop with the run's budget and writes the
kept actor's checkpoint; this script measures every iteration on fresh episodes.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from grasp_failures import policy_and_env  # bench/: run as python bench/success_potential.py

from robotrl.algos.success_potential import PotentialConfig, policy_iteration
from robotrl.benchmarks.arguments import key_values


def main(argv: list[str]) -> list[dict[str, Any]]:
    args = key_values(
        argv,
        {"checkpoint": "", "seed": "0", "iterations": "4", "base_episodes": "200",
         "episodes_per_iteration": "150", "eval_episodes": "100", "noise_std": "0.005",
         "bound": "0.05", "kappa": "0.02"},
        __doc__,
        required="checkpoint",
    )  # fmt: skip
    policy, env = policy_and_env(args["checkpoint"], "", "peg_insert")
    config = PotentialConfig(
        iterations=int(args["iterations"]), base_episodes=int(args["base_episodes"]),
        episodes_per_iteration=int(args["episodes_per_iteration"]),
        noise_std=float(args["noise_std"]), bound=float(args["bound"]),
        kappa=float(args["kappa"]),
    )  # fmt: skip

    def report(row: dict[str, Any]) -> None:
        print(json.dumps({"checkpoint": args["checkpoint"], "seed": int(args["seed"]), **row}))
        sys.stdout.flush()

    try:
        return policy_iteration(
            env, policy, config, eval_episodes=int(args["eval_episodes"]),
            seed=int(args["seed"]), keep_best=False, progress=True, report=report,
        ).evaluations  # fmt: skip
    finally:
        env.close()


if __name__ == "__main__":
    main(sys.argv[1:])

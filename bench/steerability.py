"""Can the base's noise space reach its failures? Prints JSON.

Usage: python bench/steerability.py checkpoint=<flow/diffusion ckpt> [episodes=24] [noises=8]
    [seed=100000] [neighbours=5]

Every initial state (seed ``seed + i``, ``episodes`` of them) is run from the sampler's mean
noise and from each of ``noises`` random draws, each held fixed for the whole episode, the same
draws for every state (:mod:`robotrl.benchmarks.steerability`). A state that fails from the
mean is *rescued* when one of them succeeds; ``ceiling`` is the share that succeeds from the
mean or is rescued, which bounds what an agent choosing one noise per episode (DSRL chooses one
per chunk) can reach. ``held_noise_success`` is each draw's success over all states: none far
above the mean's means that the rescuing noise differs from state to state;
``neighbour_choice_success`` says whether these episodes predict it from nearby states (a
choice by the ``neighbours`` nearest other states' outcomes, scored leave-one-out).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch
from tqdm.auto import tqdm

import sim
from policies.checkpoint import execute_horizon, load_policy
from robotrl.benchmarks.arguments import key_values
from robotrl.benchmarks.steerability import steerability
from robotrl.policy_env import env_kwargs


def base_and_env(checkpoint: str) -> tuple[Any, dict[str, Any], int, Any]:
    """The bench scripts' base in eval mode on one torch thread, its checkpoint meta, its
    execute horizon Te and a sim env of its task: ``(base, meta, te, env)``."""
    torch.set_num_threads(1)
    base, meta = load_policy(checkpoint)
    base.eval()
    te = execute_horizon(meta, base.action_horizon)
    return base, meta, te, sim.make(meta["task"], **env_kwargs(meta))


def main(argv: list[str]) -> dict[str, Any]:
    args = key_values(
        argv,
        {"checkpoint": "", "episodes": "24", "noises": "8", "seed": "100000", "neighbours": "5"},
        __doc__,
        required="checkpoint",
    )
    base, meta, te, env = base_and_env(args["checkpoint"])
    states, noises = int(args["episodes"]), int(args["noises"])
    bar = tqdm(total=states * (1 + noises), desc="steerability", file=sys.stderr)
    try:
        out = steerability(
            env, base, te, states=states, noises=noises, seed=int(args["seed"]),
            neighbours=int(args["neighbours"]), on_episode=lambda: bar.update(1),
        )  # fmt: skip
    finally:
        bar.close()
        env.close()
    return {"checkpoint": args["checkpoint"], "task": meta["task"], **out}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

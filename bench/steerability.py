"""Can the base's noise space reach its failures? Prints JSON.

Usage: python bench/steerability.py checkpoint=<flow/diffusion ckpt> [episodes=24] [noises=8]
    [seed=100000]

Every initial state (seed ``seed + i``) is first run from the prior's mean (noise 0). For each
one that fails, ``noises`` random noise draws, each held fixed for the whole episode, are tried;
a state is *rescued* when one of them succeeds. The rescued share bounds what RL in the noise
space (DSRL) can gain from this base: an agent choosing the noise per chunk has more freedom
than one fixed draw per episode, but a state no draw rescues is one where the base's
behaviour barely depends on its noise.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

import sim
from policies.checkpoint import execute_horizon, load_policy
from robotrl.benchmarks.arguments import key_values
from robotrl.chunk_runner import SingleEnvPolicy
from robotrl.policy_env import env_kwargs


class FixedNoise:
    """``base`` planning every chunk from the same initial noise (1, Ta, Da)."""

    def __init__(self, base: Any, noise: torch.Tensor) -> None:
        self.base, self.noise = base, noise
        self.config, self.obs_horizon = base.config, base.obs_horizon
        self.action_horizon, self.action_dim = base.action_horizon, base.action_dim

    def reset(self) -> None:
        self.base.reset()

    def predict_chunk(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        b = next(iter(obs.values())).shape[0]
        return self.base.predict_chunk(obs, noise=self.noise.expand(b, -1, -1))


def base_and_env(checkpoint: str) -> tuple[Any, dict[str, Any], int, Any]:
    """The bench scripts' base in eval mode on one torch thread, its checkpoint meta, its
    execute horizon Te and a sim env of its task: ``(base, meta, te, env)``."""
    torch.set_num_threads(1)
    base, meta = load_policy(checkpoint)
    base.eval()
    te = execute_horizon(meta, base.action_horizon)
    return base, meta, te, sim.make(meta["task"], **env_kwargs(meta))


def succeeds(env: Any, policy: Any, seed: int, te: int) -> bool:
    runner = SingleEnvPolicy(policy, te)
    obs, _ = env.reset(seed=seed)
    runner.reset()
    while True:
        obs, _, terminated, truncated, info = env.step(runner(obs))
        if info.get("success"):
            return True
        if terminated or truncated:
            return False


def main(argv: list[str]) -> dict[str, Any]:
    args = key_values(
        argv,
        {"checkpoint": "", "episodes": "24", "noises": "8", "seed": "100000"},
        __doc__,
        required="checkpoint",
    )
    base, meta, te, env = base_and_env(args["checkpoint"])
    shape = (1, base.action_horizon, base.action_dim)
    gen = torch.Generator().manual_seed(0)
    failed, rescued, per_state = 0, 0, []
    with torch.no_grad():
        for i in range(int(args["episodes"])):
            seed = int(args["seed"]) + i
            if succeeds(env, FixedNoise(base, torch.zeros(shape)), seed, te):
                continue
            failed += 1
            wins = sum(
                succeeds(env, FixedNoise(base, torch.randn(shape, generator=gen)), seed, te)
                for _ in range(int(args["noises"]))
            )
            rescued += wins > 0
            per_state.append({"seed": seed, "successes": wins})
    env.close()
    return {
        "checkpoint": args["checkpoint"],
        "task": meta["task"],
        "states": int(args["episodes"]),
        "failed_from_mean_noise": failed,
        "rescued_by_some_noise": rescued,
        "noises_per_state": int(args["noises"]),
        "per_failed_state": per_state,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

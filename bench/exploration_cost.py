"""What does per-step exploration noise cost the base? Prints JSON.

Usage: python bench/exploration_cost.py checkpoint=<ckpt> [episodes=100] [seed=200000]
    [stds=0,0.01,0.02,0.05] [noise_scale=0]

Runs the base (from its sampler's mean noise with ``noise_scale=0``, as ``robotrl train-rl``
runs a residual's base) with independent truncated Gaussian noise of each std [action units,
cut at 2 std, as the residual's ``explore_std``] added to every action, on the same episodes
(seeds ``seed + i``). Also with the noise on the translation (0-2) and rotation (3-5)
dimensions alone at the largest std. The residual learns from episodes run with that noise
(``ResidualConfig.explore_std``, 0.05) and its TD targets read the next action with
``ResidualConfig.target_noise``: where a std halves the base's success, most of what the
critics see is a weaker policy's data, and where the default leaves the base almost no success
(peg_insert from few demos), expect the residual alone not to learn (docs/rl_methods.md, "What
exploration costs the base").
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import torch
from steerability import base_and_env  # bench/: run as python bench/exploration_cost.py

from policies.registry import has_noise_scale, set_noise_scale
from robotrl.benchmarks.arguments import key_values
from robotrl.benchmarks.steerability import succeeds


class Explored:
    """``base`` with truncated N(0, std^2) noise on the ``dims`` of every action (clipped)."""

    def __init__(self, base: Any, std: float, dims: np.ndarray, seed: int) -> None:
        self.base, self.std = base, std
        self.mask = torch.from_numpy(dims.astype(np.float32))
        self.gen = torch.Generator().manual_seed(seed)
        self.config, self.obs_horizon = base.config, base.obs_horizon
        self.action_horizon, self.action_dim = base.action_horizon, base.action_dim

    def reset(self) -> None:
        self.base.reset()

    def predict_chunk(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        chunk = self.base.predict_chunk(obs)
        noise = torch.randn(chunk.shape, generator=self.gen) * self.std
        noise = noise.clamp(-2 * self.std, 2 * self.std) * self.mask
        return (chunk + noise).clamp(-1.0, 1.0)


def success_rate(
    env: Any, base: Any, std: float, dims: np.ndarray, episodes: int, seed: int, te: int
) -> float:
    torch.manual_seed(0)  # the base's own sampling, if any: every variant sees the same draws
    policy = Explored(base, std, dims, seed=1)
    return sum(succeeds(env, policy, seed + i, te) for i in range(episodes)) / episodes


def main(argv: list[str]) -> dict[str, Any]:
    args = key_values(
        argv,
        {
            "checkpoint": "",
            "episodes": "100",
            "seed": "200000",
            "stds": "0,0.01,0.02,0.05",
            "noise_scale": "0",
        },
        __doc__,
        required="checkpoint",
    )
    base, _, te, env = base_and_env(args["checkpoint"])
    if has_noise_scale(base):  # a flow / diffusion / VLA sampler; other policies act as they are
        set_noise_scale(base, float(args["noise_scale"]))
    stds = [float(s) for s in args["stds"].split(",")]
    if any(not np.isfinite(s) or s < 0 for s in stds):
        raise SystemExit(f"stds must be finite and >= 0, got {args['stds']}")
    n, seed, dim = int(args["episodes"]), int(args["seed"]), base.action_dim
    every = np.ones(dim)
    translation = (np.arange(dim) < 3).astype(float)
    rotation = ((np.arange(dim) >= 3) & (np.arange(dim) < 6)).astype(float)
    with torch.no_grad():
        rates = {f"{s:g}": success_rate(env, base, s, every, n, seed, te) for s in stds}
        top = max(stds)
        parts = {
            f"translation {top:g}": success_rate(env, base, top, translation, n, seed, te),
            f"rotation {top:g}": success_rate(env, base, top, rotation, n, seed, te),
        }
    env.close()
    return {"checkpoint": args["checkpoint"], "episodes": n, "seed": seed,
            "noise_scale": float(args["noise_scale"]), "success": rates,
            "success_on_dims": parts}  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

"""Which initial noises does the base act well from? The range DSRL's latent actor may use.

Usage: python bench/noise_range.py checkpoint=<flow/diffusion ckpt> [episodes=50] [seed=100000]
    [scales=0,1,1.5] [corners=1,1.5]

Runs the base's sampler with every chunk's initial noise w (Ta, Da) drawn as ``scale * N(0, I)``
(``scales``; 1 is the base's own sampling, 0 its mean) and as ``c * sign(N(0, I))``, a random
corner of the box [-c, c]^D (``corners``): where a tanh-squashed latent actor with bound c ends
up when it drifts to the bound in every dimension. Prints one JSON line per setting, then one
with all of them. The base was trained on unit Gaussian noise, whose norm is about sqrt(D):
corners of [-1, 1]^D lie at that norm, corners of [-1.5, 1.5]^D 1.5 times further out.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

import sim
from policies.checkpoint import execute_horizon, load_policy
from robotrl.chunk_runner import SingleEnvPolicy
from robotrl.evaluation import evaluate
from robotrl.policy_env import env_kwargs


class DrawnNoise:
    """``base`` planning every chunk from a fresh noise of the given kind (seeded)."""

    def __init__(self, base: Any, kind: str, scale: float, seed: int) -> None:
        self.base, self.kind, self.scale = base, kind, scale
        self.config, self.obs_horizon = base.config, base.obs_horizon
        self.action_horizon, self.action_dim = base.action_horizon, base.action_dim
        self.generator = torch.Generator().manual_seed(seed)

    def reset(self) -> None:
        self.base.reset()

    def predict_chunk(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        b = next(iter(obs.values())).shape[0]
        z = torch.randn(b, self.action_horizon, self.action_dim, generator=self.generator)
        w = self.scale * (z if self.kind == "gaussian" else torch.sign(z))
        return self.base.predict_chunk(obs, noise=w)


def main(argv: list[str]) -> dict[str, Any]:
    args = dict(a.split("=", 1) for a in argv)
    base, meta = load_policy(args["checkpoint"])
    base.eval()
    episodes, seed = int(args.get("episodes", 50)), int(args.get("seed", 100_000))
    settings = [("gaussian", float(c)) for c in args.get("scales", "0,1,1.5").split(",")]
    settings += [("corner", float(c)) for c in args.get("corners", "1,1.5").split(",")]
    te = execute_horizon(meta, base.action_horizon)
    env = sim.make(str(meta.get("task", "lift")), **env_kwargs(meta))
    torch.set_num_threads(1)
    rows = []
    for kind, scale in settings:
        policy = SingleEnvPolicy(DrawnNoise(base, kind, scale, seed), te)
        result = evaluate(env, policy, episodes, seed=seed, progress=False)
        row = {"noise": kind, "scale": scale, "episodes": episodes}
        row |= {"success": result.success_rate, "success_ci95": list(result.success_ci95)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    env.close()
    return {"bench": "noise_range", "checkpoint": args["checkpoint"], "rows": rows}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

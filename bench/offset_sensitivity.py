"""How much does a constant action offset cost the base? Prints JSON.

Usage: python bench/offset_sensitivity.py checkpoint=<ckpt> [episodes=20] [seed=100000]
    [offset=0,-0.035,-0.033,-0.055,0.032,0.064,-0.004]

Runs the base alone and with ``offset`` (normalised action units, added to every action) on all
dimensions, on the translation dimensions only (0-2) and on the rotation dimensions only (3-5),
on the same episodes (seeds ``seed + i``, the sampler's torch seed fixed). The default offset is
the mean residual a residual run on the 15-demo lift base had learnt when its success fell to 0.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import torch
from steerability import base_and_env  # bench/: run as python bench/offset_sensitivity.py

from robotrl.benchmarks.arguments import key_values
from robotrl.benchmarks.steerability import succeeds

DEFAULT_OFFSET = "0,-0.035,-0.033,-0.055,0.032,0.064,-0.004"


class Offset:
    """``base`` with a constant ``offset`` added to every action of its chunks (clipped)."""

    def __init__(self, base: Any, offset: np.ndarray) -> None:
        self.base, self.offset = base, torch.from_numpy(offset)
        self.config, self.obs_horizon = base.config, base.obs_horizon
        self.action_horizon, self.action_dim = base.action_horizon, base.action_dim

    def reset(self) -> None:
        self.base.reset()

    def predict_chunk(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return (self.base.predict_chunk(obs) + self.offset).clamp(-1.0, 1.0)


def success_rate(
    env: Any, base: Any, offset: np.ndarray, episodes: int, seed: int, te: int
) -> float:
    torch.manual_seed(0)  # the base's sampling noise: every variant sees the same draws
    policy = Offset(base, offset)
    return sum(succeeds(env, policy, seed + i, te) for i in range(episodes)) / episodes


def main(argv: list[str]) -> dict[str, Any]:
    args = key_values(
        argv,
        {"checkpoint": "", "episodes": "20", "seed": "100000", "offset": DEFAULT_OFFSET},
        __doc__,
        required="checkpoint",
    )
    base, _, te, env = base_and_env(args["checkpoint"])
    offset = np.array([float(x) for x in args["offset"].split(",")], np.float32)
    if offset.shape != (base.action_dim,):
        raise SystemExit(f"offset needs {base.action_dim} values, got {offset.size}")
    parts = {"none": np.zeros_like(offset), "all": offset}
    parts["translation"] = np.where(np.arange(offset.size) < 3, offset, 0.0)
    parts["rotation"] = np.where((np.arange(offset.size) >= 3) & (np.arange(offset.size) < 6),
                                 offset, 0.0)  # fmt: skip
    n, seed = int(args["episodes"]), int(args["seed"])
    with torch.no_grad():
        rates = {k: success_rate(env, base, v, n, seed, te) for k, v in parts.items()}
    env.close()
    return {"checkpoint": args["checkpoint"], "episodes": n, "offset": offset.tolist(),
            "success": rates}  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

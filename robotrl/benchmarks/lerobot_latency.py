"""Per-chunk latency of LeRobot's DiffusionPolicy; run by ``policy_latency.py`` inside the lerobot
venv (it imports neither robotrl nor anything the main venv pins).

Usage: <lerobot python> lerobot_latency.py '<json args>'; prints one JSON line.
State-only config (``observation.state`` = robot state, ``observation.environment_state`` =
object state), random init, DDIM with ``ddim_steps`` steps; times ``generate_actions`` (the
whole chunk), batch 1. No hub access (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np
import torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy


def main(args: dict) -> dict:
    torch.set_num_threads(args["threads"])
    torch.manual_seed(args["seed"])
    to, ta = args["obs_horizon"], args["action_horizon"]
    cfg = DiffusionConfig(
        n_obs_steps=to,
        horizon=ta,
        n_action_steps=ta // 2,
        input_features={
            "observation.state": PolicyFeature(FeatureType.STATE, (args["state_dim"],)),
            "observation.environment_state": PolicyFeature(FeatureType.ENV, (args["env_dim"],)),
        },
        output_features={"action": PolicyFeature(FeatureType.ACTION, (args["action_dim"],))},
        down_dims=tuple(args["down_dims"]),
        noise_scheduler_type="DDIM",
        num_inference_steps=args["ddim_steps"],
        device="cpu",
    )
    policy = DiffusionPolicy(cfg).eval()
    batch = {
        "observation.state": torch.randn(1, to, args["state_dim"]),
        "observation.environment_state": torch.randn(1, to, args["env_dim"]),
    }
    times = []
    with torch.no_grad():
        for i in range(args["warmup"] + args["calls"]):
            t0 = time.perf_counter()
            policy.diffusion.generate_actions(batch)
            if i >= args["warmup"]:
                times.append((time.perf_counter() - t0) * 1e3)
    import lerobot

    return {
        "median_ms": round(statistics.median(times), 3),
        "p90_ms": round(float(np.percentile(times, 90)), 3),
        "calls": args["calls"],
        "network_evals": args["ddim_steps"],
        "params": sum(p.numel() for p in policy.parameters()),
        "down_dims": list(args["down_dims"]),
        "lerobot": lerobot.__version__,
        "torch": torch.__version__,
    }


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))

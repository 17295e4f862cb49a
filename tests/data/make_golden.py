"""Writes ``tests/data/golden_flow``: a tiny format-1 flow policy checkpoint and the chunk it
predicts for a fixed observation and noise (``expected.npz``). Run it only when the checkpoint
format changes on purpose (and bump ``policies.checkpoint.FORMAT_VERSION``):
``python tests/data/make_golden.py``. ``tests/test_checkpoint.py`` loads what it wrote."""

from pathlib import Path

import numpy as np
import torch

from policies.checkpoint import save_policy
from policies.flow_matching import FlowMatchingPolicy

HERE = Path(__file__).resolve().parent / "golden_flow"
DIMS = {"state/ee_pos": 3, "state/goal_pos": 3}


def main() -> None:
    torch.manual_seed(0)
    stats = {
        "state/ee_pos": {"mean": [0.4, 0.0, 0.3], "std": [0.1, 0.1, 0.1]},
        "state/goal_pos": {"mean": [0.5, 0.0, 0.2], "std": [0.1, 0.2, 0.05]},
        "action": {"min": [-1.0] * 7, "max": [1.0] * 7},
    }
    policy = FlowMatchingPolicy(
        DIMS, 7, obs_horizon=2, action_horizon=4, num_steps=3, hidden=16, depth=1,
        obs_feature_dim=16, stats=stats,
    )  # fmt: skip
    with torch.no_grad():  # the output layer starts at zero: give it weights to pin
        for p in policy.parameters():
            p.add_(0.1 * torch.randn_like(p))
    policy.eval()
    save_policy(policy, HERE / "checkpoint", meta={"task": "reach", "execute_horizon": 2})
    rng = np.random.default_rng(0)
    obs = {k: rng.normal(0.3, 0.1, (2, 2, d)).astype(np.float32) for k, d in DIMS.items()}
    noise = rng.standard_normal((2, 4, 7)).astype(np.float32)
    with torch.no_grad():
        chunk = policy.predict_chunk(
            {k: torch.from_numpy(v) for k, v in obs.items()}, torch.from_numpy(noise)
        )
    np.savez(HERE / "expected.npz", noise=noise, chunk=chunk.numpy(), **obs)


if __name__ == "__main__":
    main()

"""Test helper: one seeded episode of a policy in an env."""

from typing import Any


def run_episode(env: Any, policy: Any, seed: int) -> tuple[dict, dict]:
    """Reset ``env`` with ``seed`` and ``policy``, step until the episode ends; the last
    ``(obs, info)``."""
    obs, _ = env.reset(seed=seed)
    policy.reset()
    for _ in range(env.max_episode_steps):
        obs, _, terminated, truncated, info = env.step(policy(obs))
        if terminated or truncated:
            break
    return obs, info

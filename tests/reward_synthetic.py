"""Synthetic success images for the reward-classifier tests: a red square means success."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robotrl.datasets import EpisodeStore

SIZE = 16  # [px] image height and width


def image(rng: np.random.Generator, success: bool) -> np.ndarray:
    """(SIZE, SIZE, 3) uint8 noisy grey background with a 5 px square: red when ``success``,
    blue otherwise (so colour, not the presence of a square, carries the label)."""
    img = rng.integers(60, 120, (SIZE, SIZE, 3)).astype(np.uint8)
    r, c = rng.integers(0, SIZE - 5, 2)
    img[r : r + 5, c : c + 5] = (220, 30, 30) if success else (30, 30, 220)
    return img


def write_store(path: Path, episodes: int = 12, length: int = 10, seed: int = 0) -> Path:
    """A store of ``episodes`` episodes (odd ones fail): every step has ``images/front`` and
    ``state/x``; successful episodes show the red square from their last 2 steps on, get
    reward 1 on the last step and end with a red final observation."""
    rng = np.random.default_rng(seed)
    store = EpisodeStore.create(path, fps=10.0, robot="test", durable=False)
    for e in range(episodes):
        success = e % 2 == 0
        with store.begin_episode(task="synthetic") as w:
            for t in range(length):
                red = success and t >= length - 2
                obs = {"images/front": image(rng, red), "state/x": np.float32([t, red])}
                reward = float(success and t == length - 1)
                w.add(obs, np.zeros(7, np.float32), reward=reward)
            final = {"images/front": image(rng, success), "state/x": np.float32([length, success])}
            w.commit(success=success, terminated=success, final_obs=final)
    store.close()
    return path

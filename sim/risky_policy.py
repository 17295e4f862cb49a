"""Deliberately unsafe scripted behaviour: the offline data of the risk critic and the
adversaries its reflex is measured against.

Each entry of :data:`RISKY_POLICIES` is a factory ``(env, rng) -> policy``; a policy maps the
observation dict to an action (7,) in [-1, 1] for one episode.

- ``careless``: the task's scripted expert with action noise (std 0.3) that descends at full
  speed: every downward command becomes -1, so it rams the peg, gripper or cube into
  whatever is below instead of slowing and aligning;
- ``random``: uniform random motion with a downward drift (z in [-1, 0.5]) so that it reaches
  the table within an episode, gripper as at reset (holding whatever it holds);
- ``adversarial``: drives straight down at full speed with a random sideways component
  (|x|, |y| <= 0.3) fixed per episode: a policy that pushes into the table / block on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from sim.env import PandaEnv
from sim.registry import make_expert

Policy = Callable[[Mapping[str, np.ndarray]], np.ndarray]


def careless(env: PandaEnv, rng: np.random.Generator) -> Policy:

    expert = make_expert(env.task.name, env, noise=0.3, seed=int(rng.integers(2**31)))

    def act(obs: Mapping[str, np.ndarray]) -> np.ndarray:
        a = np.asarray(expert(obs), dtype=np.float32).copy()
        if a[2] < 0:
            a[2] = -1.0
        return a

    return act


def _gripper(obs: Mapping[str, np.ndarray]) -> float:
    """+1 (closed) when the fingers are nearly closed (holding a peg), else -1 (open)."""
    return 1.0 if float(obs["state/gripper"][0]) < 0.06 else -1.0


def random_motion(env: PandaEnv, rng: np.random.Generator) -> Policy:
    grip: list[float] = []

    def act(obs: Mapping[str, np.ndarray]) -> np.ndarray:
        if not grip:
            grip.append(_gripper(obs))
        a = rng.uniform(-1.0, 1.0, 7).astype(np.float32)
        a[2] = rng.uniform(-1.0, 0.5)
        a[6] = grip[0]
        return a

    return act


def adversarial(env: PandaEnv, rng: np.random.Generator) -> Policy:
    side = rng.uniform(-0.3, 0.3, 2)
    grip: list[float] = []

    def act(obs: Mapping[str, np.ndarray]) -> np.ndarray:
        if not grip:
            grip.append(_gripper(obs))
        return np.array([side[0], side[1], -1.0, 0.0, 0.0, 0.0, grip[0]], dtype=np.float32)

    return act


RISKY_POLICIES: dict[str, Callable[[PandaEnv, np.random.Generator], Policy]] = {
    "careless": careless,
    "random": random_motion,
    "adversarial": adversarial,
}

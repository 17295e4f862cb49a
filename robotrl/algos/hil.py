"""Human-in-the-loop interveners for RL training: who may take over, and when.

An intervener is called every env step with ``(env_id, obs, proposed_action)`` and returns the
human's action while intervening, else None; ``reset(env_id)`` marks an episode start.

- :class:`ScriptedHuman`: a scripted expert watching the agent; it takes over when the agent's
  proposed motion or the gripper's turn strays from what the expert would do (for
  ``patience`` steps in a row), and keeps control for ``hold`` steps, like an operator
  correcting a robot, then hands back.
- :class:`DeviceIntervener`: a real teleop device (keyboard, SpaceMouse, gamepad); the operator
  intervenes whenever the device reports motion or a held intervention button.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from hardware.devices import TeleopDevice


class ScriptedHuman:
    """Expert-based intervention for sim and tests.

    Args:
        make_expert: builds one scripted expert per env (stateful phases).
        num_envs: envs it watches.
        threshold: straying = ``||proposed[:3] - expert[:3]|| > threshold`` (action units).
        patience: consecutive straying steps before taking over.
        hold: steps the human keeps control once in.
        rotation_threshold: also straying: ``||proposed[3:6] - expert[3:6]|| >
            rotation_threshold`` (the rotation entries, action units; an action without them
            never strays in rotation); None: the motion only.

    Raises:
        ValueError: a ``rotation_threshold`` that is not a positive number.
    """

    def __init__(
        self,
        make_expert: Callable[[], Any],
        num_envs: int = 1,
        threshold: float = 0.5,
        patience: int = 3,
        hold: int = 10,
        rotation_threshold: float | None = 1.0,
    ) -> None:
        if rotation_threshold is not None and not rotation_threshold > 0:
            raise ValueError(
                f"human_rotation_threshold must be > 0 or null, got {rotation_threshold}"
            )
        self.experts = [make_expert() for _ in range(num_envs)]
        self.threshold, self.patience, self.hold = threshold, patience, hold
        self.rotation_threshold = rotation_threshold
        self._stray = [0] * num_envs
        self._left = [0] * num_envs

    def reset(self, env_id: int) -> None:
        self.experts[env_id].reset()
        self._stray[env_id] = self._left[env_id] = 0

    def __call__(
        self, env_id: int, obs: Mapping[str, np.ndarray], proposed: np.ndarray
    ) -> np.ndarray | None:
        expert_action = self.experts[env_id](obs)  # always observe: keeps the phase current
        if self._left[env_id] > 0:
            self._left[env_id] -= 1
            return expert_action
        strays = self._strays(proposed, expert_action)
        self._stray[env_id] = self._stray[env_id] + 1 if strays else 0
        if self._stray[env_id] >= self.patience:
            self._stray[env_id] = 0
            self._left[env_id] = self.hold - 1
            return expert_action
        return None

    def _strays(self, proposed: np.ndarray, expert_action: np.ndarray) -> bool:
        gap = np.asarray(proposed, dtype=float) - expert_action
        if float(np.linalg.norm(gap[:3])) > self.threshold:
            return True
        turn = self.rotation_threshold
        return turn is not None and float(np.linalg.norm(gap[3:6])) > turn


class DeviceIntervener:
    """A teleop device as the intervening human (one env). Start the device before training."""

    def __init__(self, device: TeleopDevice) -> None:
        self.device = device

    def reset(self, env_id: int) -> None:
        self.device.reset()

    def __call__(
        self, env_id: int, obs: Mapping[str, np.ndarray], proposed: np.ndarray
    ) -> np.ndarray | None:
        cmd = self.device.read()
        return cmd.action if cmd.intervene else None

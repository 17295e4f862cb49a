"""``reach``: bring the TCP within 2 cm of a goal point. Trivial; for fast tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import mujoco
import numpy as np

from sim.expert import ScriptedExpert, yaw_down
from sim.task import Task

GOAL_CENTER = np.array([0.5, 0.0, 0.25])  # [m], world frame
GOAL_TOLERANCE = 0.02  # [m]


@dataclass
class ReachTask(Task):
    name: str = "reach"
    max_episode_steps: int = 50
    goal: np.ndarray = field(default_factory=lambda: GOAL_CENTER.copy())

    def objects_xml(self) -> str:
        return (
            '<body name="goal" mocap="true" pos="0.5 0 0.25">'
            '<geom type="sphere" size="0.02" rgba="0 0.8 0 0.4" contype="0" conaffinity="0"/>'
            "</body>"
        )

    def bind(self, model: mujoco.MjModel) -> None:
        self._mocap = int(model.body("goal").mocapid[0])
        self._tcp = model.site("tcp").id

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        r = self.randomization.object_pos
        self.goal = GOAL_CENTER + rng.uniform(-1, 1, 3) * np.array([r, 2 * r, r])
        data.mocap_pos[self._mocap] = self.goal

    def observe(self, data: mujoco.MjData) -> dict[str, np.ndarray]:
        return {"state/goal_pos": self.goal}

    def observation_sizes(self) -> dict[str, int]:
        return {"goal_pos": 3}

    def success(self, data: mujoco.MjData) -> bool:
        return bool(np.linalg.norm(data.site_xpos[self._tcp] - self.goal) < GOAL_TOLERANCE)

    def dense_reward(self, data: mujoco.MjData, tcp_pos: np.ndarray) -> float:
        return float(1.0 - np.tanh(5.0 * np.linalg.norm(tcp_pos - self.goal)))


class ReachExpert(ScriptedExpert):
    """Straight line to the goal, TCP kept pointing down."""

    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.move(obs, obs["state/goal_pos"].astype(float), yaw_down(0.0), -1.0)

"""``lift``: grasp a 4 cm cube from the table and lift it 10 cm."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import mujoco
import numpy as np

from sim.expert import ScriptedExpert, grasp_yaw, yaw_down
from sim.task import Task, free_joint_qpos_adr, yaw_quat

CUBE_HALF = 0.02  # [m]
CUBE_MASS = 0.1  # [kg]
CUBE_CENTER = np.array([0.5, 0.0])  # nominal xy on the table [m]
LIFT_HEIGHT = 0.10  # success: cube centre this far above its start [m]


def colored_cubes_xml(colors: dict[str, str]) -> str:
    """MJCF of one free cube per ``{name: rgba}`` (body, joint and geom named after it), placed
    apart along y; tasks move them at reset."""
    return "".join(
        f"""
<body name="{c}" pos="0.5 {0.1 * i} {CUBE_HALF}">
  <freejoint name="{c}"/>
  <geom name="{c}" type="box" size="{CUBE_HALF} {CUBE_HALF} {CUBE_HALF}" mass="{CUBE_MASS}"
        rgba="{rgba}" class="object"/>
</body>"""
        for i, (c, rgba) in enumerate(colors.items())
    )


@dataclass
class LiftTask(Task):
    name: str = "lift"
    max_episode_steps: int = 100
    object_bodies: tuple[str, ...] = ("cube",)

    def objects_xml(self) -> str:
        return f"""
<body name="cube" pos="0.5 0 {CUBE_HALF}">
  <freejoint name="cube"/>
  <geom name="cube" type="box" size="{CUBE_HALF} {CUBE_HALF} {CUBE_HALF}" mass="{CUBE_MASS}"
        rgba="0.85 0.15 0.1 1" class="object"/>
</body>"""

    def bind(self, model: mujoco.MjModel) -> None:
        self._qadr = free_joint_qpos_adr(model, "cube")
        self._body = model.body("cube").id
        self.start_z = CUBE_HALF

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        r = self.randomization
        xy = CUBE_CENTER + rng.uniform(-1, 1, 2) * np.array([r.object_pos, 1.5 * r.object_pos])
        data.qpos[self._qadr : self._qadr + 3] = (*xy, CUBE_HALF)
        data.qpos[self._qadr + 3 : self._qadr + 7] = yaw_quat(rng.uniform(-1, 1) * r.object_yaw)
        self.start_z = CUBE_HALF

    def observe(self, data: mujoco.MjData) -> dict[str, np.ndarray]:
        return {
            "state/cube_pos": data.xpos[self._body],
            "state/cube_quat": data.xquat[self._body],
        }

    def observation_sizes(self) -> dict[str, int]:
        return {"cube_pos": 3, "cube_quat": 4}

    def success(self, data: mujoco.MjData) -> bool:
        return bool(data.xpos[self._body][2] > self.start_z + LIFT_HEIGHT)

    def dense_reward(self, data: mujoco.MjData, tcp_pos: np.ndarray) -> float:
        cube = data.xpos[self._body]
        reach = 1.0 - np.tanh(10.0 * np.linalg.norm(tcp_pos - cube))
        lift = np.clip((cube[2] - self.start_z) / LIFT_HEIGHT, 0.0, 1.0)
        return float(0.3 * reach + 0.7 * lift)


class LiftExpert(ScriptedExpert):
    """Above the cube -> down -> close -> lift, yaw matched to the cube's faces."""

    HOVER = 0.08  # [m] above the cube before descending
    CLOSE_STEPS = 6  # control steps to wait while the fingers close

    def reset(self) -> None:
        super().reset()
        self._wait = 0

    def grasp(
        self, obs: Mapping[str, np.ndarray], cube: np.ndarray, rot: np.ndarray
    ) -> np.ndarray | None:
        """Phases 0-2 (hover above ``cube`` (3,) [m], descend, close, TCP orientation ``rot``):
        their action, or None once the fingers have closed (phase 3: the caller moves on)."""
        ee = obs["state/ee_pos"].astype(float)
        if self.phase == 0:  # hover
            goal = cube + np.array([0.0, 0.0, self.HOVER])
            if np.linalg.norm(goal - ee) < 0.01:
                self.phase = 1
            return self.move(obs, goal, rot, -1.0)
        if self.phase == 1:  # descend
            if np.linalg.norm(cube - ee) < 0.006:
                self.phase, self._wait = 2, 0
            return self.move(obs, cube, rot, -1.0)
        if self.phase == 2:  # close
            self._wait += 1
            if self._wait >= self.CLOSE_STEPS:
                self.phase = 3
            return self.move(obs, cube, rot, 1.0)
        return None

    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        cube = obs["state/cube_pos"].astype(float)
        rot = yaw_down(grasp_yaw(obs["state/cube_quat"]))
        action = self.grasp(obs, cube, rot)
        if action is not None:
            return action
        goal = np.array([cube[0], cube[1], CUBE_HALF + LIFT_HEIGHT + 0.05])
        return self.move(obs, goal, rot, 1.0)

"""``pick_color``: two cubes, red and green, at random places; the instruction ("lift the red
cube" / "lift the green cube") names the one to lift 10 cm. The other cube is a distractor:
without the instruction a policy can do no better than a coin flip."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import mujoco
import numpy as np

from sim.instructed_env import LANGUAGE_KEY, InstructedTask
from sim.task import free_joint_qpos_adr, yaw_quat
from sim.tasks.lift import CUBE_HALF, LIFT_HEIGHT, LiftExpert, colored_cubes_xml

COLORS = {"red": "0.85 0.15 0.1 1", "green": "0.1 0.7 0.2 1"}
PLACE_CENTER = np.array([0.5, 0.0])  # nominal xy of the placement area [m]
PLACE_HALF = np.array([0.1, 0.15])  # half extent of the placement area [m] (x object_pos)
MIN_SEPARATION = 0.11  # cube centres at least this far apart [m]: open fingers clear the other


def target_color(instruction: str) -> str:
    """The cube colour an instruction names (ValueError if it names none or both)."""
    words = set(instruction.lower().replace(".", " ").split())
    named = [c for c in COLORS if c in words]
    if len(named) != 1:
        raise ValueError(f"instruction {instruction!r} must name exactly one of {list(COLORS)}")
    return named[0]


@dataclass
class PickColorTask(InstructedTask):
    name: str = "pick_color"
    max_episode_steps: int = 100
    object_bodies: tuple[str, ...] = ("red", "green")
    instructions: tuple[str, ...] = ("lift the red cube", "lift the green cube")

    def objects_xml(self) -> str:
        return colored_cubes_xml(COLORS)

    def bind(self, model: mujoco.MjModel) -> None:
        self._qadr = {c: free_joint_qpos_adr(model, c) for c in COLORS}
        self._body = {c: model.body(c).id for c in COLORS}
        self.instruction = self.instructions[0]

    @property
    def target(self) -> str:
        """Colour of the cube the current instruction names."""
        return target_color(self.instruction)

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        r = self.randomization
        self.instruction = self.instructions[int(rng.integers(len(self.instructions)))]
        half = PLACE_HALF * (r.object_pos / 0.1)
        while True:  # rejection sampling: a few draws at most for these extents
            xy = PLACE_CENTER + rng.uniform(-1, 1, (2, 2)) * half
            if np.linalg.norm(xy[0] - xy[1]) >= MIN_SEPARATION:
                break
        for c, p in zip(COLORS, xy, strict=True):
            q = self._qadr[c]
            data.qpos[q : q + 3] = (*p, CUBE_HALF)
            data.qpos[q + 3 : q + 7] = yaw_quat(rng.uniform(-1, 1) * r.object_yaw)

    def observe(self, data: mujoco.MjData) -> dict[str, np.ndarray]:
        out = {}
        for c, b in self._body.items():
            out[f"state/{c}_pos"] = data.xpos[b]
            out[f"state/{c}_quat"] = data.xquat[b]
        return out

    def observation_sizes(self) -> dict[str, int]:
        return {n: s for c in COLORS for n, s in ((f"{c}_pos", 3), (f"{c}_quat", 4))}

    def success(self, data: mujoco.MjData) -> bool:
        return bool(data.xpos[self._body[self.target]][2] > CUBE_HALF + LIFT_HEIGHT)

    def dense_reward(self, data: mujoco.MjData, tcp_pos: np.ndarray) -> float:
        cube = data.xpos[self._body[self.target]]
        reach = 1.0 - np.tanh(10.0 * np.linalg.norm(tcp_pos - cube))
        lift = np.clip((cube[2] - CUBE_HALF) / LIFT_HEIGHT, 0.0, 1.0)
        return float(0.3 * reach + 0.7 * lift)


class PickColorExpert(LiftExpert):
    """The lift expert aimed at the cube the observation's instruction names."""

    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        c = target_color(str(obs[LANGUAGE_KEY]))
        cube = {"state/cube_pos": obs[f"state/{c}_pos"], "state/cube_quat": obs[f"state/{c}_quat"]}
        return super().__call__({**obs, **cube})

"""``peg_insert``: insert a held square peg into a hole with 1 mm total clearance.

The peg (2.4 cm square, 8 cm long) starts grasped; the hole (2.5 cm square, 4 cm deep) sits in
a fixed block on the table at a random pose. Contact-rich: a misaligned, stiff descent jams
the peg against the block, which is where compliance and force limits matter.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from controllers.rotations import mat_to_quat
from sim.expert import ScriptedExpert, grasp_yaw, yaw_down
from sim.task import Task, free_joint_qpos_adr, yaw_quat

PEG_HALF = 0.012  # half width [m]
PEG_HALF_LEN = 0.04  # half length [m]
PEG_MASS = 0.05  # [kg]
CLEARANCE = 0.001  # hole width - peg width [m]
HOLE_HALF = PEG_HALF + CLEARANCE / 2
HOLE_DEPTH = 0.04  # [m]; the block top is at this height
BLOCK_HALF = 0.05  # [m]
HOLE_CENTER = np.array([0.55, 0.0])  # nominal xy [m]
PEG_IN_HAND = 0.01  # peg centre beyond the TCP along the TCP z axis [m]
INSERT_DEPTH = 0.02  # success: peg bottom this far below the block top [m]


def _block_xml() -> str:
    w = (BLOCK_HALF - HOLE_HALF) / 2  # wall half thickness
    c = HOLE_HALF + w  # wall centre offset
    z = HOLE_DEPTH / 2
    walls = [
        (f"{c} 0 {z}", f"{w} {BLOCK_HALF} {z}"),
        (f"{-c} 0 {z}", f"{w} {BLOCK_HALF} {z}"),
        (f"0 {c} {z}", f"{HOLE_HALF} {w} {z}"),
        (f"0 {-c} {z}", f"{HOLE_HALF} {w} {z}"),
    ]
    geoms = "\n".join(
        f'<geom name="block{i}" type="box" pos="{p}" size="{s}" rgba="0.3 0.45 0.7 1" '
        f'class="object"/>'
        for i, (p, s) in enumerate(walls)
    )
    return f'<body name="hole" mocap="true" pos="0.55 0 0">{geoms}</body>'


@dataclass
class PegInsertTask(Task):
    name: str = "peg_insert"
    max_episode_steps: int = 120
    object_bodies: tuple[str, ...] = ("peg",)

    def objects_xml(self) -> str:
        return f"""
{_block_xml()}
<body name="peg" pos="0.4 0 0.3">
  <freejoint name="peg"/>
  <geom name="peg" type="box" size="{PEG_HALF} {PEG_HALF} {PEG_HALF_LEN}" mass="{PEG_MASS}"
        rgba="0.9 0.7 0.1 1" class="object"/>
</body>"""

    def bind(self, model: mujoco.MjModel) -> None:
        self._qadr = free_joint_qpos_adr(model, "peg")
        self._peg = model.body("peg").id
        self._mocap = int(model.body("hole").mocapid[0])
        self._fingers = [
            model.jnt_qposadr[model.joint(n).id] for n in ("finger_left", "finger_right")
        ]
        self._gripper = model.actuator("gripper").id
        self.hole_pos = np.array([*HOLE_CENTER, HOLE_DEPTH])
        self.hole_quat = np.array([1.0, 0.0, 0.0, 0.0])

    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        r = self.randomization
        xy = HOLE_CENTER + rng.uniform(-1, 1, 2) * np.array([r.object_pos, 1.5 * r.object_pos])
        self.hole_quat = yaw_quat(rng.uniform(-1, 1) * r.object_yaw)
        self.hole_pos = np.array([*xy, HOLE_DEPTH])
        data.mocap_pos[self._mocap] = (*xy, 0.0)
        data.mocap_quat[self._mocap] = self.hole_quat

    def after_reset(self, env: object) -> None:
        """Put the peg between the closed fingers (slightly squeezed, so the grasp holds)."""
        data = env.data  # type: ignore[attr-defined]
        tcp = env.state  # type: ignore[attr-defined]
        data.qpos[self._qadr : self._qadr + 3] = tcp.ee_pos + tcp.ee_rot[:, 2] * PEG_IN_HAND
        data.qpos[self._qadr + 3 : self._qadr + 7] = mat_to_quat(tcp.ee_rot)
        data.qpos[self._fingers] = PEG_HALF - 0.0003
        data.ctrl[self._gripper] = 0.0

    def observe(self, data: mujoco.MjData) -> dict[str, np.ndarray]:
        return {
            "state/peg_pos": data.xpos[self._peg],
            "state/peg_quat": data.xquat[self._peg],
            "state/hole_pos": self.hole_pos,
            "state/hole_quat": self.hole_quat,
        }

    def observation_sizes(self) -> dict[str, int]:
        return {"peg_pos": 3, "peg_quat": 4, "hole_pos": 3, "hole_quat": 4}

    def peg_bottom(self, data: mujoco.MjData) -> np.ndarray:
        """(3,) centre of the peg's lower end [m] (the end away from the hand)."""
        axis = data.xmat[self._peg].reshape(3, 3)[:, 2]
        return data.xpos[self._peg] + np.sign(-axis[2] or -1.0) * axis * PEG_HALF_LEN

    def success(self, data: mujoco.MjData) -> bool:
        bottom = self.peg_bottom(data)
        inside = np.linalg.norm(bottom[:2] - self.hole_pos[:2]) < HOLE_HALF
        return bool(inside and bottom[2] < HOLE_DEPTH - INSERT_DEPTH)

    def dense_reward(self, data: mujoco.MjData, tcp_pos: np.ndarray) -> float:
        bottom = self.peg_bottom(data)
        xy = np.linalg.norm(bottom[:2] - self.hole_pos[:2])
        depth = np.clip((HOLE_DEPTH - bottom[2]) / INSERT_DEPTH, 0.0, 1.0)
        return float(0.5 * (1.0 - np.tanh(20.0 * xy)) + 0.5 * depth * (xy < HOLE_HALF))


class PegInsertExpert(ScriptedExpert):
    """Carry the peg above the hole, align on the peg's own position, descend slowly."""

    HOVER = 0.025  # peg bottom above the block top while aligning [m]

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        hole = obs["state/hole_pos"].astype(float)
        peg = obs["state/peg_pos"].astype(float)
        ee = obs["state/ee_pos"].astype(float)
        rot = yaw_down(grasp_yaw(obs["state/hole_quat"]))
        # Steer the TCP so that the peg (which may sit off-centre in the hand) meets the hole.
        offset = peg - ee
        hover = hole + np.array([0.0, 0.0, self.HOVER + PEG_HALF_LEN]) - offset
        if self.phase == 0:
            if np.linalg.norm(hover - ee) < 0.004:
                self.phase = 1
            return self.move(obs, hover, rot, 1.0)
        goal = hole + np.array([0.0, 0.0, PEG_HALF_LEN - INSERT_DEPTH - 0.012]) - offset
        if np.linalg.norm(hover[:2] - ee[:2]) > 0.004 and ee[2] > hole[2] + PEG_HALF_LEN:
            self.phase = 0  # drifted before entering: realign
        return self.move(obs, goal, rot, 1.0, speed=0.35)

"""``peg_insert``: insert a held square peg into a hole with 1 mm total clearance.

The peg (2.4 cm square, 8 cm long) starts grasped; the hole (2.5 cm square, 4 cm deep, 2 mm
chamfer) sits in a fixed block on the table at a random pose. Contact-rich: a misaligned, stiff
descent jams the peg against the block, which is where compliance and force limits matter.
"""

from __future__ import annotations

from collections.abc import Mapping
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
CHAMFER = 0.002  # 45-degree chamfer on the hole's rim [m]: guides a compliant peg in
BLOCK_HALF = 0.05  # [m]
HOLE_CENTER = np.array([0.55, 0.0])  # nominal xy [m]
PEG_IN_HAND = 0.01  # peg centre beyond the TCP along the TCP z axis [m]
INSERT_DEPTH = 0.02  # success: peg bottom this far below the block top [m]


def _block_xml() -> str:
    """The hole block: per side an outer wall, an inner strip below the chamfer and a 45-degree
    rotated box whose upper face is the chamfer (boxes only, so contacts stay cheap). The strip
    ends a chamfer-width below the chamfer's lower edge: where the two met, box-box contacts
    produced a horizontal ledge that caught peg corners."""
    h, c, b, d = HOLE_HALF, CHAMFER, BLOCK_HALF, HOLE_DEPTH
    s = c / np.sqrt(2.0)  # half side of the chamfer box
    e = 2 * c  # the strip under the chamfer stops below it: no ledge for a peg corner to catch
    geoms = []
    for sign in (1.0, -1.0):
        for axis in (0, 1):

            def xy(along: float, across: float, axis: int = axis) -> str:
                return f"{along} {across}" if axis == 0 else f"{across} {along}"

            rot = "0 0.785398163 0" if axis == 0 else "0.785398163 0 0"
            span = b if axis == 0 else h + c  # the x walls run the block's full length
            geoms += [
                (xy(sign * (h + c + b) / 2, 0), d / 2, xy((b - h - c) / 2, span), d / 2, "0 0 0"),
                (xy(sign * (h + c / 2), 0), (d - e) / 2, xy(c / 2, h + c), (d - e) / 2, "0 0 0"),
                (xy(sign * (h + c), 0), d - c, xy(s, h + c), s, rot),
            ]
    xml = "\n".join(
        f'<geom name="block{i}" type="box" pos="{p} {z}" size="{hs} {hz}" euler="{e}" '
        f'rgba="0.3 0.45 0.7 1" class="object"/>'
        for i, (p, z, hs, hz, e) in enumerate(geoms)
    )
    return f'<body name="hole" mocap="true" pos="0.55 0 0">{xml}</body>'


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
    """Carry the peg above the hole, align the peg itself to < 1 mm, descend slowly; back off
    and realign when the peg is off-centre before it has entered the hole."""

    HOVER = 0.025  # peg bottom above the block top while aligning [m]
    ALIGNED = 0.001  # peg-to-hole xy error at which the descent starts [m]
    MISALIGNED = 0.0025  # xy error on the rim (beyond the chamfer) that sends it back [m]
    SETTLED = 0.01  # TCP speed below which the descent may start [m/s]
    DESCENT_SPEED = 0.25  # fraction of the full action while descending

    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        hole = obs["state/hole_pos"].astype(float)
        peg = obs["state/peg_pos"].astype(float)
        ee = obs["state/ee_pos"].astype(float)
        rot = yaw_down(grasp_yaw(obs["state/hole_quat"]))
        # Steer the TCP so that the peg (which may sit off-centre in the hand) meets the hole.
        offset = peg - ee
        xy_error = np.linalg.norm(hole[:2] - peg[:2])
        hover = hole + np.array([0.0, 0.0, self.HOVER + PEG_HALF_LEN]) - offset
        if self.phase == 0:
            settled = np.linalg.norm(obs["state/ee_twist"][:3]) < self.SETTLED
            if xy_error < self.ALIGNED and abs(hover[2] - ee[2]) < 0.005 and settled:
                self.phase = 1
            return self.move(obs, hover, rot, 1.0)
        bottom = peg[2] - PEG_HALF_LEN  # peg held vertical
        on_rim = hole[2] - 0.002 < bottom < hole[2] + 0.003
        if on_rim and xy_error > self.MISALIGNED:
            self.phase = 0  # touching the block top off-centre: lift and realign
            return self.move(obs, hover, rot, 1.0)
        goal = hole + np.array([0.0, 0.0, PEG_HALF_LEN - INSERT_DEPTH - 0.012]) - offset
        # Full gain sideways (keep centring on the hole), a slow, capped descent.
        goal[2] = max(goal[2], ee[2] - self.DESCENT_SPEED * self.max_dpos)
        return self.move(obs, goal, rot, 1.0)

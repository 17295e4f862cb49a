"""The tasks of ``sim/tasks/`` rebuilt in PyBullet: same objects, placement, observations,
success tests and dense rewards, with the constants imported from the MuJoCo tasks so the two
backends cannot drift apart.

A task draws its random numbers in the same order as its MuJoCo twin, so one seed gives the
same goal / cube placement in both backends (the arm's joint noise is drawn first, by the env).
Quaternions in observations are (w, x, y, z) as in MuJoCo (PyBullet's are x, y, z, w).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import pybullet as pb

from controllers.rotations import mat_to_quat, quat_to_mat
from sim.pybullet_arm import FINGER_JOINTS
from sim.task import DomainRandomization, yaw_quat
from sim.tasks import peg_insert as peg
from sim.tasks.lift import CUBE_CENTER, CUBE_HALF, CUBE_MASS, LIFT_HEIGHT
from sim.tasks.reach import GOAL_CENTER, GOAL_TOLERANCE

OBJECT_FRICTION = 1.0  # lateral friction of task objects (our MJCF objects: 1.0)


def wxyz(q_xyzw: tuple[float, ...] | np.ndarray) -> np.ndarray:
    """PyBullet quaternion (x, y, z, w) -> (w, x, y, z)."""
    x, y, z, w = q_xyzw
    return np.array([w, x, y, z])


def xyzw(q_wxyz: np.ndarray) -> list[float]:
    """(w, x, y, z) -> PyBullet's (x, y, z, w)."""
    w, x, y, z = (float(v) for v in q_wxyz)
    return [x, y, z, w]


class PyBulletTask(ABC):
    """What a task supplies to :class:`sim.pybullet_env.PyBulletPandaEnv`.

    Attributes:
        name: registry name (the same as the MuJoCo task's).
        max_episode_steps: truncation horizon at the control rate.
        randomization: the MuJoCo task's randomisation knobs (object_pos, object_yaw,
            joint_noise, friction and mass are honoured).
    """

    name = "task"
    max_episode_steps = 100

    def __init__(self) -> None:
        self.randomization = DomainRandomization()

    def build(self, client: int) -> None:  # noqa: B027 - optional hook
        """Create the task's bodies in ``client`` (once, after the arm and the floor)."""

    def after_reset(self, env: object) -> None:  # noqa: B027 - optional hook
        """Called once the arm and objects are placed and the arm state is read."""

    @abstractmethod
    def reset(self, client: int, rng: np.random.Generator) -> None:
        """Place the objects (the arm is already at its initial pose)."""

    @abstractmethod
    def observe(self, client: int) -> dict[str, np.ndarray]:
        """Task entries of the observation (keys ``state/<name>``)."""

    @abstractmethod
    def observation_sizes(self) -> dict[str, int]:
        """Sizes of the entries :meth:`observe` returns."""

    @abstractmethod
    def success(self, client: int, tcp_pos: np.ndarray) -> bool:
        """Whether the task is achieved; ``tcp_pos`` (3,) [m] is the measured TCP position."""

    def dense_reward(self, client: int, tcp_pos: np.ndarray) -> float:
        """Shaped reward in [0, 1]."""
        return float(self.success(client, tcp_pos))


class PyBulletReach(PyBulletTask):
    """``reach``: the TCP within 2 cm of a random goal point (no physical object)."""

    name = "reach"
    max_episode_steps = 50

    def __init__(self) -> None:
        super().__init__()
        self.goal = GOAL_CENTER.copy()

    def reset(self, client: int, rng: np.random.Generator) -> None:
        r = self.randomization.object_pos
        self.goal = GOAL_CENTER + rng.uniform(-1, 1, 3) * np.array([r, 2 * r, r])

    def observe(self, client: int) -> dict[str, np.ndarray]:
        return {"state/goal_pos": self.goal}

    def observation_sizes(self) -> dict[str, int]:
        return {"goal_pos": 3}

    def success(self, client: int, tcp_pos: np.ndarray) -> bool:
        return bool(np.linalg.norm(tcp_pos - self.goal) < GOAL_TOLERANCE)

    def dense_reward(self, client: int, tcp_pos: np.ndarray) -> float:
        return float(1.0 - np.tanh(5.0 * np.linalg.norm(tcp_pos - self.goal)))


class PyBulletLift(PyBulletTask):
    """``lift``: grasp a 4 cm, 0.1 kg cube and lift it 10 cm."""

    name = "lift"
    max_episode_steps = 100

    def build(self, client: int) -> None:
        shape = pb.createCollisionShape(
            pb.GEOM_BOX, halfExtents=[CUBE_HALF] * 3, physicsClientId=client
        )
        visual = pb.createVisualShape(
            pb.GEOM_BOX, halfExtents=[CUBE_HALF] * 3, rgbaColor=[0.85, 0.15, 0.1, 1],
            physicsClientId=client,
        )  # fmt: skip
        self.cube = pb.createMultiBody(
            CUBE_MASS, shape, visual, basePosition=[*CUBE_CENTER, CUBE_HALF],
            physicsClientId=client,
        )  # fmt: skip
        pb.changeDynamics(self.cube, -1, lateralFriction=OBJECT_FRICTION, physicsClientId=client)
        self._nominal_mass = CUBE_MASS

    def reset(self, client: int, rng: np.random.Generator) -> None:
        r = self.randomization
        xy = CUBE_CENTER + rng.uniform(-1, 1, 2) * np.array([r.object_pos, 1.5 * r.object_pos])
        w, x, y, z = yaw_quat(rng.uniform(-1, 1) * r.object_yaw)
        pb.resetBasePositionAndOrientation(
            self.cube, [*xy, CUBE_HALF], [x, y, z, w], physicsClientId=client
        )
        pb.resetBaseVelocity(self.cube, [0, 0, 0], [0, 0, 0], physicsClientId=client)
        mass = self._nominal_mass * (rng.uniform(1 - r.mass, 1 + r.mass) if r.mass > 0 else 1)
        mu = OBJECT_FRICTION * (
            rng.uniform(1 - r.friction, 1 + r.friction) if r.friction > 0 else 1
        )
        pb.changeDynamics(self.cube, -1, mass=mass, lateralFriction=mu, physicsClientId=client)

    def _pose(self, client: int) -> tuple[np.ndarray, np.ndarray]:
        pos, quat = pb.getBasePositionAndOrientation(self.cube, physicsClientId=client)
        return np.asarray(pos), wxyz(quat)

    def observe(self, client: int) -> dict[str, np.ndarray]:
        pos, quat = self._pose(client)
        return {"state/cube_pos": pos, "state/cube_quat": quat}

    def observation_sizes(self) -> dict[str, int]:
        return {"cube_pos": 3, "cube_quat": 4}

    def success(self, client: int, tcp_pos: np.ndarray) -> bool:
        return bool(self._pose(client)[0][2] > CUBE_HALF + LIFT_HEIGHT)

    def dense_reward(self, client: int, tcp_pos: np.ndarray) -> float:
        cube = self._pose(client)[0]
        reach = 1.0 - np.tanh(10.0 * np.linalg.norm(tcp_pos - cube))
        lift = np.clip((cube[2] - CUBE_HALF) / LIFT_HEIGHT, 0.0, 1.0)
        return float(0.3 * reach + 0.7 * lift)


def _block_boxes() -> list[tuple[list[float], list[float], list[float]]]:
    """(position, half extents, PyBullet quaternion) of every box of the MuJoCo hole block, read
    from its MJCF so the two blocks are the same geometry (walls, strips, 45-degree chamfers)."""
    import xml.etree.ElementTree as ET

    body = ET.fromstring(peg._block_xml())
    boxes = []
    for g in body.iter("geom"):
        pos = [float(v) for v in g.get("pos", "0 0 0").split()]
        half = [float(v) for v in g.get("size", "").split()]
        euler = [float(v) for v in g.get("euler", "0 0 0").split()]
        boxes.append((pos, half, list(pb.getQuaternionFromEuler(euler))))
    return boxes


class PyBulletPegInsert(PyBulletTask):
    """``peg_insert``: a held 2.4 cm square peg into a hole with 1 mm clearance (2 cm deep)."""

    name = "peg_insert"
    max_episode_steps = 120

    def __init__(self) -> None:
        super().__init__()
        self.hole_pos = np.array([*peg.HOLE_CENTER, peg.HOLE_DEPTH])
        self.hole_quat = np.array([1.0, 0.0, 0.0, 0.0])

    def build(self, client: int) -> None:
        boxes = _block_boxes()
        kw = {
            "halfExtents": [b[1] for b in boxes],
            "physicsClientId": client,
        }
        shape = pb.createCollisionShapeArray(
            [pb.GEOM_BOX] * len(boxes),
            collisionFramePositions=[b[0] for b in boxes],
            collisionFrameOrientations=[b[2] for b in boxes],
            **kw,
        )
        visual = pb.createVisualShapeArray(
            [pb.GEOM_BOX] * len(boxes),
            visualFramePositions=[b[0] for b in boxes],
            visualFrameOrientations=[b[2] for b in boxes],
            rgbaColors=[[0.3, 0.45, 0.7, 1]] * len(boxes),
            **kw,
        )
        self.block = pb.createMultiBody(0.0, shape, visual, physicsClientId=client)
        pb.changeDynamics(self.block, -1, lateralFriction=OBJECT_FRICTION, physicsClientId=client)
        half = [peg.PEG_HALF, peg.PEG_HALF, peg.PEG_HALF_LEN]
        self.peg = pb.createMultiBody(
            peg.PEG_MASS,
            pb.createCollisionShape(pb.GEOM_BOX, halfExtents=half, physicsClientId=client),
            pb.createVisualShape(
                pb.GEOM_BOX, halfExtents=half, rgbaColor=[0.9, 0.7, 0.1, 1], physicsClientId=client
            ),
            basePosition=[0.4, 0.0, 0.3],
            physicsClientId=client,
        )
        pb.changeDynamics(self.peg, -1, lateralFriction=OBJECT_FRICTION, physicsClientId=client)

    def reset(self, client: int, rng: np.random.Generator) -> None:
        r = self.randomization
        xy = peg.HOLE_CENTER + rng.uniform(-1, 1, 2) * np.array([r.object_pos, 1.5 * r.object_pos])
        self.hole_quat = yaw_quat(rng.uniform(-1, 1) * r.object_yaw)
        self.hole_pos = np.array([*xy, peg.HOLE_DEPTH])
        pb.resetBasePositionAndOrientation(
            self.block, [*xy, 0.0], xyzw(self.hole_quat), physicsClientId=client
        )

    def after_reset(self, env: object) -> None:
        """Put the peg between the fingers, closed on it (slightly squeezed, so the grasp holds)."""
        s, arm = env.state, env.arm  # type: ignore[attr-defined]
        c = arm.client
        pos = s.ee_pos + s.ee_rot[:, 2] * peg.PEG_IN_HAND
        pb.resetBasePositionAndOrientation(
            self.peg, pos.tolist(), xyzw(mat_to_quat(s.ee_rot)), physicsClientId=c
        )
        pb.resetBaseVelocity(self.peg, [0, 0, 0], [0, 0, 0], physicsClientId=c)
        for j in FINGER_JOINTS:
            pb.resetJointState(arm.body, j, peg.PEG_HALF - 0.0003, 0.0, physicsClientId=c)
        arm.set_gripper(0.0)

    def _pose(self, client: int) -> tuple[np.ndarray, np.ndarray]:
        pos, quat = pb.getBasePositionAndOrientation(self.peg, physicsClientId=client)
        return np.asarray(pos), wxyz(quat)

    def observe(self, client: int) -> dict[str, np.ndarray]:
        pos, quat = self._pose(client)
        return {
            "state/peg_pos": pos,
            "state/peg_quat": quat,
            "state/hole_pos": self.hole_pos,
            "state/hole_quat": self.hole_quat,
        }

    def observation_sizes(self) -> dict[str, int]:
        return {"peg_pos": 3, "peg_quat": 4, "hole_pos": 3, "hole_quat": 4}

    def peg_bottom(self, client: int) -> np.ndarray:
        """(3,) centre of the peg's lower end [m] (the end away from the hand)."""
        pos, quat = self._pose(client)
        axis = quat_to_mat(quat)[:, 2]
        return pos + np.sign(-axis[2] or -1.0) * axis * peg.PEG_HALF_LEN

    def success(self, client: int, tcp_pos: np.ndarray) -> bool:
        bottom = self.peg_bottom(client)
        inside = np.linalg.norm(bottom[:2] - self.hole_pos[:2]) < peg.HOLE_HALF
        return bool(inside and bottom[2] < peg.HOLE_DEPTH - peg.INSERT_DEPTH)

    def dense_reward(self, client: int, tcp_pos: np.ndarray) -> float:
        bottom = self.peg_bottom(client)
        xy = np.linalg.norm(bottom[:2] - self.hole_pos[:2])
        depth = np.clip((peg.HOLE_DEPTH - bottom[2]) / peg.INSERT_DEPTH, 0.0, 1.0)
        return float(0.5 * (1.0 - np.tanh(20.0 * xy)) + 0.5 * depth * (xy < peg.HOLE_HALF))


PYBULLET_TASKS: dict[str, type[PyBulletTask]] = {
    "reach": PyBulletReach,
    "lift": PyBulletLift,
    "peg_insert": PyBulletPegInsert,
}

"""The Franka Panda that ships with ``pybullet_data``, driven by joint torques.

This is the PyBullet backend's "robot driver": it plays the part that libfranka + the ROS 2
bridge play on hardware. Each tick it fills an :class:`~controllers.arm_state.ArmState` the way
the hardware path does -- pose and Jacobian from our own DH model
(:meth:`ArmState.update_from_chain`), gravity and Coriolis from the robot's model (here
PyBullet's inverse dynamics of the URDF, on a Franka libfranka's) -- and applies the torques
the numpy controller computed. The URDF's own kinematics agree with ``controllers.panda`` to
1e-8 m at the home pose (checked in ``tests/test_pybullet_env.py``); its inertias, meshes and
contact model are PyBullet's, not ours, which is what makes it a stand-in for "another robot".

Joint indices of the URDF: 0-6 arm joints, 8 ``panda_hand`` (fixed), 9/10 the fingers.
"""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pybullet_data

from controllers import panda
from controllers.arm_state import ArmState
from controllers.kinematics import SerialChain, panda_chain

ARM_JOINTS = tuple(range(7))
FINGER_JOINTS = (9, 10)
HAND_LINK = 8
ALL_DOFS = (*ARM_JOINTS, *FINGER_JOINTS)  # the URDF's movable joints, in inverse-dynamics order
FINGER_FORCE = 0.5 * panda.GRASP_FORCE  # per finger [N]: the two squeeze with GRASP_FORCE
FINGER_GEAR_FORCE = 200.0  # [N] bound of the constraint coupling the two fingers
FINGER_FRICTION = 1.5  # lateral friction of the finger pads (as our MJCF pads)
# PyBullet adds no joint damping and no rotor inertia; a little viscous damping [Nm s/rad]
# stands in for the real drives' friction (MuJoCo's arm has damping 0.1 + armature 0.1).
JOINT_DAMPING = 0.1


class PyBulletPanda:
    """One Panda in a PyBullet client (fixed base at the world origin), torque-controlled.

    Args:
        client: PyBullet physics client id (``pb.connect(pb.DIRECT)``).
        with_mass: also fill ``state.mass`` (operational-space control needs it).
    """

    def __init__(self, client: int, with_mass: bool = False) -> None:
        self.client = client
        self.with_mass = with_mass
        pb.setAdditionalSearchPath(pybullet_data.getDataPath(), physicsClientId=client)
        self.body = pb.loadURDF(
            "franka_panda/panda.urdf",
            useFixedBase=True,
            flags=pb.URDF_USE_SELF_COLLISION_EXCLUDE_ALL_PARENTS,
            physicsClientId=client,
        )
        for j in FINGER_JOINTS:
            pb.changeDynamics(self.body, j, lateralFriction=FINGER_FRICTION, physicsClientId=client)
        for j in ARM_JOINTS:
            pb.changeDynamics(
                self.body, j, jointDamping=JOINT_DAMPING, linearDamping=0.0,
                angularDamping=0.0, physicsClientId=client,
            )  # fmt: skip
        # The two finger joints are independent in the URDF: under equal and opposite servo
        # forces a held object and both fingers slide sideways together. A gear constraint
        # makes them mirror each other, as the real gripper's mechanism (and our MJCF) does.
        gear = pb.createConstraint(
            self.body, FINGER_JOINTS[0], self.body, FINGER_JOINTS[1], pb.JOINT_GEAR,
            [1, 0, 0], [0, 0, 0], [0, 0, 0], physicsClientId=client,
        )  # fmt: skip
        pb.changeConstraint(
            gear, gearRatio=-1, erp=0.1, maxForce=FINGER_GEAR_FORCE, physicsClientId=client
        )
        self.chain: SerialChain = panda_chain()
        self._zeros9 = [0.0] * len(ALL_DOFS)
        self._finger_target = panda.FINGER_TRAVEL

    def reset(self, q: np.ndarray, finger: float = panda.FINGER_TRAVEL) -> None:
        """Teleport to joint positions ``q`` (7,) [rad] at rest, fingers at ``finger`` [m] each.

        The URDF's default velocity motors are switched off (zero force) so that torque control
        acts alone, as on a torque-controlled Franka.
        """
        c = self.client
        for j, qj in zip(ARM_JOINTS, q, strict=True):
            pb.resetJointState(self.body, j, float(qj), 0.0, physicsClientId=c)
        for j in FINGER_JOINTS:
            pb.resetJointState(self.body, j, float(finger), 0.0, physicsClientId=c)
        pb.setJointMotorControlArray(
            self.body, ARM_JOINTS, pb.VELOCITY_CONTROL, forces=[0.0] * 7, physicsClientId=c
        )
        self.set_gripper(finger)

    def read(self, state: ArmState) -> ArmState:
        """Fill ``state`` in place: q, dq from the joints; TCP pose and Jacobian from our DH
        chain; ``gravity`` = the torque holding the arm (PyBullet does not compensate it);
        ``coriolis`` from inverse dynamics; ``mass`` when ``with_mass``."""
        c, body = self.client, self.body
        js = pb.getJointStates(body, ALL_DOFS, physicsClientId=c)
        q9 = [s[0] for s in js]
        dq9 = [s[1] for s in js]
        state.update_from_chain(self.chain, np.asarray(q9[:7]), np.asarray(dq9[:7]))
        g = pb.calculateInverseDynamics(body, q9, self._zeros9, self._zeros9, physicsClientId=c)
        gc = pb.calculateInverseDynamics(body, q9, dq9, self._zeros9, physicsClientId=c)
        state.gravity[:] = g[:7]
        state.coriolis[:] = np.subtract(gc[:7], g[:7])
        if self.with_mass:
            state.mass[:] = np.asarray(pb.calculateMassMatrix(body, q9, physicsClientId=c))[:7, :7]
        return state

    def apply_torque(self, tau: np.ndarray) -> None:
        """Command joint torques ``tau`` (7,) [Nm] for the next physics step."""
        pb.setJointMotorControlArray(
            self.body, ARM_JOINTS, pb.TORQUE_CONTROL, forces=tau.tolist(),
            physicsClientId=self.client,
        )  # fmt: skip

    def set_gripper(self, finger: float) -> None:
        """Position-servo each finger to ``finger`` [m] (0 closed, FINGER_TRAVEL open)."""
        self._finger_target = float(np.clip(finger, 0.0, panda.FINGER_TRAVEL))
        pb.setJointMotorControlArray(
            self.body, FINGER_JOINTS, pb.POSITION_CONTROL,
            targetPositions=[self._finger_target] * 2, forces=[FINGER_FORCE] * 2,
            physicsClientId=self.client,
        )  # fmt: skip

    def gripper_command(self) -> float:
        """The gripper command [-1 open, +1 closed] the finger servos currently follow."""
        return 1.0 - 2.0 * self._finger_target / panda.FINGER_TRAVEL

    def gripper_opening(self) -> float:
        """Distance between the fingers [m] (sum of the two finger travels)."""
        js = pb.getJointStates(self.body, FINGER_JOINTS, physicsClientId=self.client)
        return float(js[0][0] + js[1][0])

    def external_wrench(self, flange_pos: np.ndarray) -> np.ndarray:
        """(6,) wrench that contacts apply to the hand and fingers [N, Nm], base frame, torque
        about ``flange_pos`` (3,) [m] -- what a bias-removed wrist F/T sensor reads at rest."""
        out = np.zeros(6)
        for link in (HAND_LINK, *FINGER_JOINTS):
            for cp in pb.getContactPoints(
                bodyA=self.body, linkIndexA=link, physicsClientId=self.client
            ):
                # normal points from B to A: the force on A is +normal * fn (+ friction).
                n = np.asarray(cp[7])
                f = n * cp[9] + np.asarray(cp[11]) * cp[10] + np.asarray(cp[13]) * cp[12]
                out[:3] += f
                out[3:] += np.cross(np.asarray(cp[5]) - flange_pos, f)
        return out

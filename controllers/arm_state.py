"""The measured state of an arm that the controllers read each tick.

Whoever owns the robot (the MuJoCo env, the ROS 2 bridge, a test) allocates one ``ArmState`` and
fills its arrays in place every tick; controllers only read them.
"""

from __future__ import annotations

import numpy as np

from controllers.kinematics import SerialChain


class ArmState:
    """Preallocated state of an n-joint arm; all arrays are filled in place.

    Attributes:
        q: (n,) joint positions [rad].
        dq: (n,) joint velocities [rad/s].
        ee_pos: (3,) TCP position [m], base frame.
        ee_rot: (3, 3) TCP orientation (maps TCP frame vectors into the base frame).
        jac: (6, n) geometric Jacobian at the TCP, base frame: rows 0-2 linear [m/rad],
            rows 3-5 angular [rad/rad].
        coriolis: (n,) Coriolis and centrifugal torques [Nm] (no gravity).
        gravity: (n,) torque to ADD to hold the arm against gravity [Nm]; zero when the robot
            or the simulator compensates gravity itself (Franka, our MJCF with gravcomp).
        mass: (n, n) joint-space inertia matrix [kg m^2]; only read by controllers with
            ``needs_mass = True``.
    """

    def __init__(self, num_joints: int = 7) -> None:
        if num_joints < 1:
            raise ValueError(f"num_joints must be >= 1, got {num_joints}")
        n = int(num_joints)
        self.num_joints = n
        self.q = np.zeros(n)
        self.dq = np.zeros(n)
        self.ee_pos = np.zeros(3)
        self.ee_rot = np.eye(3)
        self.jac = np.zeros((6, n))
        self.coriolis = np.zeros(n)
        self.gravity = np.zeros(n)
        self.mass = np.eye(n)

    @classmethod
    def from_kinematics(cls, chain: SerialChain, q: np.ndarray, dq: np.ndarray) -> ArmState:
        """A new state with pose and Jacobian from ``chain`` at (q [rad], dq [rad/s])."""
        state = cls(chain.num_joints)
        state.update_from_chain(chain, q, dq)
        return state

    def update_from_chain(self, chain: SerialChain, q: np.ndarray, dq: np.ndarray) -> None:
        """Fill q, dq, ee_pos, ee_rot and jac in place from the kinematic model (hardware path).

        Coriolis, gravity and mass are left as they are: on a Franka they come from the robot's
        own model (libfranka), not from the kinematic chain.
        """
        if chain.num_joints != self.num_joints:
            raise ValueError(f"chain has {chain.num_joints} joints, state has {self.num_joints}")
        np.copyto(self.q, q)
        np.copyto(self.dq, dq)
        chain.jacobian(self.q, out=self.jac)
        tool = chain.tool_pose()
        np.copyto(self.ee_pos, tool[:3, 3])
        np.copyto(self.ee_rot, tool[:3, :3])

    def is_finite(self) -> bool:
        """True when every array the controllers read holds only finite numbers."""
        return all(
            bool(np.isfinite(a).all())
            for a in (self.q, self.dq, self.ee_pos, self.ee_rot, self.jac, self.coriolis,
                      self.gravity, self.mass)
        )  # fmt: skip

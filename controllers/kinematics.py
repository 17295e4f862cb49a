"""Forward kinematics and the geometric Jacobian of a serial arm in modified DH form.

This is the model the hardware path uses (no simulator on the robot PC). The simulator builds
its arm from the same parameters (``sim/arm.py``), and ``tests/test_kinematics.py`` checks the
two against each other and the Jacobian against finite differences.

Frames: ``base`` is the robot base (frame 0); the tool frame is the flange rotated by
``tool_yaw`` about flange z and shifted ``tool_offset`` along it (the Panda's TCP).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from controllers import panda


def _dh_transform(a: float, d: float, alpha: float, q: float, out: np.ndarray) -> np.ndarray:
    """Modified DH transform Rx(alpha) Tx(a) Rz(q) Tz(d), written into ``out`` (4, 4)."""
    ca, sa, cq, sq = np.cos(alpha), np.sin(alpha), np.cos(q), np.sin(q)
    out[0, 0], out[0, 1], out[0, 2], out[0, 3] = cq, -sq, 0.0, a
    out[1, 0], out[1, 1], out[1, 2], out[1, 3] = sq * ca, cq * ca, -sa, -sa * d
    out[2, 0], out[2, 1], out[2, 2], out[2, 3] = sq * sa, cq * sa, ca, ca * d
    out[3, 0], out[3, 1], out[3, 2], out[3, 3] = 0.0, 0.0, 0.0, 1.0
    return out


@dataclass
class SerialChain:
    """A revolute serial chain in modified DH form with a fixed flange and tool.

    Args:
        a: (n+1,) link lengths a_{i-1} [m]; the last entry is the flange.
        d: (n+1,) link offsets d_i [m].
        alpha: (n+1,) link twists alpha_{i-1} [rad].
        tool_yaw: rotation of the tool about flange z [rad].
        tool_offset: tool centre point along the (rotated) flange z [m].
    """

    a: np.ndarray
    d: np.ndarray
    alpha: np.ndarray
    tool_yaw: float = 0.0
    tool_offset: float = 0.0
    _frames: np.ndarray = field(init=False, repr=False)
    _step: np.ndarray = field(init=False, repr=False)
    _tool: np.ndarray = field(init=False, repr=False)
    _lever: np.ndarray = field(init=False, repr=False)
    _tmp: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.a, self.d, self.alpha = (
            np.asarray(x, dtype=float) for x in (self.a, self.d, self.alpha)
        )
        if not (self.a.shape == self.d.shape == self.alpha.shape) or self.a.ndim != 1:
            raise ValueError(
                f"DH arrays must share one 1-D shape, got {self.a.shape}, {self.d.shape}, "
                f"{self.alpha.shape}"
            )
        self._frames = np.zeros((self.num_joints + 2, 4, 4))
        self._step = np.eye(4)
        self._tool = np.eye(4)
        self._lever = np.zeros((self.num_joints, 3))
        self._tmp = np.zeros(self.num_joints)
        cy, sy = np.cos(self.tool_yaw), np.sin(self.tool_yaw)
        self._tool[:2, :2] = [[cy, -sy], [sy, cy]]
        self._tool[2, 3] = self.tool_offset

    @property
    def num_joints(self) -> int:
        return self.a.shape[0] - 1

    def frames(self, q: np.ndarray) -> np.ndarray:
        """Poses of joint frames 1..n, the flange and the tool in the base frame.

        Args:
            q: (n,) joint positions [rad].
        Returns:
            (n+2, 4, 4) homogeneous transforms; a view into a buffer reused by the next call.
        """
        q = np.asarray(q, dtype=float)
        if q.shape != (self.num_joints,):
            raise ValueError(f"q must have shape ({self.num_joints},), got {q.shape}")
        frames = self._frames
        _dh_transform(self.a[0], self.d[0], self.alpha[0], q[0], frames[0])
        for i in range(1, self.num_joints + 1):
            qi = q[i] if i < self.num_joints else 0.0
            _dh_transform(self.a[i], self.d[i], self.alpha[i], qi, self._step)
            np.matmul(frames[i - 1], self._step, out=frames[i])
        np.matmul(frames[-2], self._tool, out=frames[-1])
        return frames

    def forward(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Tool pose in the base frame: position (3,) [m] and rotation matrix (3, 3)."""
        tool = self.frames(q)[-1]
        return tool[:3, 3].copy(), tool[:3, :3].copy()

    def jacobian(self, q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Geometric Jacobian of the tool point, base frame.

        Args:
            q: (n,) joint positions [rad].
            out: optional (6, n) array to write into (no allocation).
        Returns:
            (6, n): rows 0-2 map qdot [rad/s] to tool linear velocity [m/s], rows 3-5 to
            angular velocity [rad/s], both expressed in the base frame. After the call,
            ``self.frames`` buffer holds the poses at ``q`` (see :meth:`tool_pose`).
        """
        if out is None:
            out = np.empty((6, self.num_joints))
        frames = self.frames(q)
        n = self.num_joints
        z = frames[:n, :3, 2]  # joint i+1 rotates about its own z axis
        r = self._lever
        np.subtract(frames[-1, :3, 3], frames[:n, :3, 3], out=r)  # joint origin -> tool point
        # out[:3] = cross(z, r), written component-wise to avoid np.cross's temporaries
        tmp = self._tmp
        for row, (a, b) in enumerate(((1, 2), (2, 0), (0, 1))):
            np.multiply(z[:, a], r[:, b], out=out[row])
            np.multiply(z[:, b], r[:, a], out=tmp)
            out[row] -= tmp
        np.copyto(out[3:], z.T)
        return out

    def tool_pose(self) -> np.ndarray:
        """(4, 4) tool pose of the last :meth:`frames`/:meth:`jacobian` call (a view)."""
        return self._frames[-1]


def panda_chain() -> SerialChain:
    """The Franka Panda arm with its hand: tool frame at the TCP between the fingertips."""
    return SerialChain(
        a=panda.DH_A,
        d=panda.DH_D,
        alpha=panda.DH_ALPHA,
        tool_yaw=panda.HAND_YAW,
        tool_offset=panda.TCP_OFFSET,
    )

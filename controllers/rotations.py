"""Rotation helpers: quaternions (w, x, y, z), rotation matrices and rotation vectors.

Rotation vectors are axis * angle [rad] with the angle in [0, pi]. The conversions that the
controllers call every tick (:func:`orientation_error`) work on Python floats to keep the number
of numpy calls small; the others are plain numpy and allocate their results.
"""

from __future__ import annotations

import math

import numpy as np

_NAN4 = (math.nan, math.nan, math.nan, math.nan)
_SMALL_ANGLE = 1e-8  # [rad]: below this the first-order series is exact to float precision


def quat_to_mat(q: np.ndarray) -> np.ndarray:
    """Rotation matrix (3, 3) of a quaternion (4,) (w, x, y, z); ``q`` need not be unit."""
    q = np.asarray(q, dtype=float)
    if q.shape != (4,):
        raise ValueError(f"quaternion must have shape (4,), got {q.shape}")
    n = float(np.dot(q, q))
    if not n > 0.0 or not math.isfinite(n):
        raise ValueError(f"quaternion must be finite and non-zero, got {q}")
    w, x, y, z = (q / math.sqrt(n)).tolist()
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def quat_from_mat_elements(
    r00: float, r01: float, r02: float,
    r10: float, r11: float, r12: float,
    r20: float, r21: float, r22: float,
) -> tuple[float, float, float, float]:  # fmt: skip
    """Shepperd's method: unit quaternion (w >= 0) of a rotation matrix given element-wise.

    Picks the largest of (w, x, y, z) to divide by, so it is accurate at every angle,
    including near pi. A slightly non-orthonormal matrix gives the nearest-ish unit quaternion.
    """
    tr = r00 + r11 + r22
    if not math.isfinite(tr):
        return _NAN4
    if tr >= r00 and tr >= r11 and tr >= r22:
        s = 2.0 * math.sqrt(max(1.0 + tr, 0.0))
        if s == 0.0:
            return _NAN4
        w, x, y, z = 0.25 * s, (r21 - r12) / s, (r02 - r20) / s, (r10 - r01) / s
    elif r00 >= r11 and r00 >= r22:
        s = 2.0 * math.sqrt(max(1.0 + r00 - r11 - r22, 0.0))
        if s == 0.0:
            return _NAN4
        w, x, y, z = (r21 - r12) / s, 0.25 * s, (r01 + r10) / s, (r02 + r20) / s
    elif r11 >= r22:
        s = 2.0 * math.sqrt(max(1.0 + r11 - r00 - r22, 0.0))
        if s == 0.0:
            return _NAN4
        w, x, y, z = (r02 - r20) / s, (r01 + r10) / s, 0.25 * s, (r12 + r21) / s
    else:
        s = 2.0 * math.sqrt(max(1.0 + r22 - r00 - r11, 0.0))
        if s == 0.0:
            return _NAN4
        w, x, y, z = (r10 - r01) / s, (r02 + r20) / s, (r12 + r21) / s, 0.25 * s
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    n = math.sqrt(w * w + x * x + y * y + z * z)
    if not n > 0.0:  # not a rotation (NaN or degenerate input): propagate NaN, never raise
        return _NAN4
    return w / n, x / n, y / n, z / n


def _rotvec_from_quat(w: float, x: float, y: float, z: float) -> tuple[float, float, float]:
    """Rotation vector of a unit quaternion with w >= 0 (angle in [0, pi])."""
    s = math.sqrt(x * x + y * y + z * z)
    if s < 0.5 * _SMALL_ANGLE:
        return 2.0 * x, 2.0 * y, 2.0 * z  # angle/sin(angle/2) -> 2
    k = 2.0 * math.atan2(s, w) / s
    return k * x, k * y, k * z


def mat_to_quat(rot: np.ndarray) -> np.ndarray:
    """Unit quaternion (4,) (w, x, y, z), w >= 0, of a rotation matrix (3, 3)."""
    rot = np.asarray(rot, dtype=float)
    if rot.shape != (3, 3):
        raise ValueError(f"rotation matrix must have shape (3, 3), got {rot.shape}")
    return np.array(quat_from_mat_elements(*rot.ravel().tolist()))


def rotvec_to_mat(v: np.ndarray) -> np.ndarray:
    """Rotation matrix (3, 3) of a rotation vector (3,) (axis * angle [rad]), Rodrigues' formula."""
    v = np.asarray(v, dtype=float)
    if v.shape != (3,):
        raise ValueError(f"rotation vector must have shape (3,), got {v.shape}")
    x, y, z = v.tolist()
    theta = math.sqrt(x * x + y * y + z * z)
    if theta < _SMALL_ANGLE:
        a, b = 1.0, 0.5  # sin(t)/t and (1 - cos(t))/t^2 at t -> 0
    else:
        a, b = math.sin(theta) / theta, (1.0 - math.cos(theta)) / (theta * theta)
    return np.array(
        [
            [1 - b * (y * y + z * z), -a * z + b * x * y, a * y + b * x * z],
            [a * z + b * x * y, 1 - b * (x * x + z * z), -a * x + b * y * z],
            [-a * y + b * x * z, a * x + b * y * z, 1 - b * (x * x + y * y)],
        ]
    )


def mat_to_rotvec(rot: np.ndarray) -> np.ndarray:
    """Rotation vector (3,) [rad], angle in [0, pi], of a rotation matrix (3, 3).

    Goes through the quaternion (Shepperd), so it is accurate near 0 and near pi; at exactly pi
    either of the two equivalent vectors may be returned.
    """
    rot = np.asarray(rot, dtype=float)
    if rot.shape != (3, 3):
        raise ValueError(f"rotation matrix must have shape (3, 3), got {rot.shape}")
    return np.array(_rotvec_from_quat(*quat_from_mat_elements(*rot.ravel().tolist())))


def orientation_error(
    rot_cur: np.ndarray, rot_tgt: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    """Orientation error (3,) [rad]: rotation vector of ``rot_cur @ rot_tgt.T``, base frame.

    Both rotations are (3, 3) and map their frame into the base frame. The error is the rotation
    that takes the target frame onto the current one, so a rotational spring applies the torque
    ``-K * error``. Writes into ``out`` (3,) when given (no allocation).
    """
    a = rot_cur.tolist()
    b = rot_tgt.tolist()
    a0, a1, a2 = a
    b0, b1, b2 = b
    # E = A B^T: E[i][j] = row_i(A) . row_j(B)
    e = [
        a_i[0] * b_j[0] + a_i[1] * b_j[1] + a_i[2] * b_j[2]
        for a_i in (a0, a1, a2)
        for b_j in (b0, b1, b2)
    ]
    rx, ry, rz = _rotvec_from_quat(*quat_from_mat_elements(*e))
    if out is None:
        return np.array((rx, ry, rz))
    out[0], out[1], out[2] = rx, ry, rz
    return out

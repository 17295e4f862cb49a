"""Lie-group identities of the rotation helpers, including the near-pi and near-zero cases."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controllers.rotations import (
    mat_to_quat,
    mat_to_rotvec,
    orientation_error,
    quat_to_mat,
    rotvec_to_mat,
)

finite = st.floats(-10.0, 10.0, allow_nan=False)
vectors = st.tuples(finite, finite, finite).map(np.array)
quats = (
    st.tuples(finite, finite, finite, finite)
    .map(np.array)
    .filter(lambda q: np.linalg.norm(q) > 1e-3)
)


def _is_rotation(r: np.ndarray) -> bool:
    return np.allclose(r @ r.T, np.eye(3), atol=1e-12) and math.isclose(np.linalg.det(r), 1.0)


@settings(max_examples=300, deadline=None)
@given(quats)
def test_quaternion_round_trip(q: np.ndarray) -> None:
    r = quat_to_mat(q)
    assert _is_rotation(r)
    q2 = mat_to_quat(r)
    assert q2[0] >= 0
    unit = q / np.linalg.norm(q)
    assert np.allclose(q2, unit if unit[0] >= 0 else -unit, atol=1e-9) or np.isclose(
        unit[0], 0.0, atol=1e-9
    )
    assert np.allclose(quat_to_mat(q2), r, atol=1e-12)


@settings(max_examples=300, deadline=None)
@given(vectors)
def test_exp_log_round_trip(v: np.ndarray) -> None:
    r = rotvec_to_mat(v)
    assert _is_rotation(r)
    w = mat_to_rotvec(r)
    assert np.linalg.norm(w) <= math.pi + 1e-12
    assert np.allclose(rotvec_to_mat(w), r, atol=1e-9)  # exp(log(R)) = R
    if np.linalg.norm(v) < math.pi - 1e-6:
        assert np.allclose(w, v, atol=1e-8)  # log(exp(v)) = v inside the injectivity radius


@pytest.mark.parametrize("eps", [0.0, 1e-12, 1e-9, 1e-6, 1e-3])
def test_near_pi_and_near_zero(eps: float) -> None:
    axis = np.array([1.0, 2.0, -2.0]) / 3.0
    for angle in (math.pi - eps, eps):
        r = rotvec_to_mat(axis * angle)
        w = mat_to_rotvec(r)
        assert np.allclose(rotvec_to_mat(w), r, atol=1e-12)
        assert math.isclose(np.linalg.norm(w), angle, abs_tol=1e-9)
        if angle < 3.0:
            assert np.allclose(w, axis * angle, atol=1e-12)
        else:  # at pi, either direction is the same rotation
            assert np.allclose(np.abs(w), np.abs(axis * angle), atol=1e-7)


@settings(max_examples=200, deadline=None)
@given(vectors, vectors)
def test_orientation_error_is_log_of_relative_rotation(a: np.ndarray, b: np.ndarray) -> None:
    r_cur, r_tgt = rotvec_to_mat(a), rotvec_to_mat(b)
    e = orientation_error(r_cur, r_tgt)
    assert np.allclose(rotvec_to_mat(e), r_cur @ r_tgt.T, atol=1e-9)
    out = np.zeros(3)
    assert orientation_error(r_cur, r_tgt, out=out) is out
    assert np.array_equal(out, e)


def test_orientation_error_sign_drives_toward_target() -> None:
    """A small rotation of the current frame about +z gives +z error: torque -K e turns it back."""
    r_tgt = rotvec_to_mat(np.array([0.3, -0.2, 0.1]))
    r_cur = rotvec_to_mat(np.array([0.0, 0.0, 0.01])) @ r_tgt
    assert np.allclose(orientation_error(r_cur, r_tgt), [0.0, 0.0, 0.01], atol=1e-12)


def test_invalid_inputs() -> None:
    with pytest.raises(ValueError):
        quat_to_mat(np.zeros(4))
    with pytest.raises(ValueError):
        mat_to_quat(np.eye(4))
    assert np.all(np.isnan(orientation_error(np.full((3, 3), np.nan), np.eye(3))))

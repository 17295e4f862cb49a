"""Safety filter: deterministic limits, fuzzed with random, huge, NaN and inf inputs."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from controllers import panda
from controllers.rotations import orientation_error, rotvec_to_mat
from controllers.safety_filter import FLAGS, SafetyFilter

LOW, HIGH = np.array([0.2, -0.4, 0.05]), np.array([0.8, 0.4, 0.7])
anything = st.floats(allow_nan=True, allow_infinity=True, width=64)
wild = st.one_of(anything, st.floats(-1e300, 1e300), st.floats(-5, 5))


def _filter() -> SafetyFilter:
    f = SafetyFilter(LOW, HIGH)
    f.reset(np.array([0.5, 0.0, 0.4]), np.diag([1.0, -1.0, -1.0]))
    return f


NAN3, INF3, HUGE3 = np.full(3, np.nan), np.full(3, np.inf), np.full(3, 1e300)
NAN33, INF33, HUGE33 = np.full((3, 3), np.nan), np.full((3, 3), -np.inf), np.full((3, 3), 1e300)


@settings(max_examples=300, deadline=None)
@given(arrays(float, 3, elements=wild), arrays(float, (3, 3), elements=wild),
       arrays(float, 3, elements=wild), arrays(float, (3, 3), elements=wild))  # fmt: skip
# the corner cases always run, whatever hypothesis draws: all-NaN, all-inf, all-huge
@example(NAN3, NAN33, NAN3, NAN33)
@example(INF3, INF33, -INF3, INF33)
@example(HUGE3, HUGE33, -HUGE3, HUGE33)
@example(-HUGE3, np.eye(3), NAN3, np.eye(3))
def test_targets_always_inside_workspace_and_step(pos, rot, cur_pos, cur_rot) -> None:
    f = _filter()
    prev_pos, prev_rot = np.array([0.5, 0.0, 0.4]), np.diag([1.0, -1.0, -1.0])
    for _ in range(2):
        p, r = f.filter_target(pos, rot, cur_pos, cur_rot)
        assert np.all(np.isfinite(p)) and np.all(np.isfinite(r))
        assert np.all(p >= LOW) and np.all(p <= HIGH)
        assert np.allclose(r @ r.T, np.eye(3), atol=1e-9)
        assert np.linalg.norm(p - prev_pos) <= f.max_pos_step + 1e-12
        assert np.linalg.norm(orientation_error(r, prev_rot)) <= f.max_rot_step + 1e-9
        prev_pos, prev_rot = p, r


@settings(max_examples=500, deadline=None)
@given(arrays(float, 7, elements=wild), arrays(float, 7, elements=wild),
       arrays(float, 7, elements=wild))  # fmt: skip
@example(np.full(7, np.nan), np.full(7, np.nan), np.full(7, np.nan))
@example(np.full(7, np.inf), panda.Q_HOME, np.full(7, -np.inf))
@example(np.full(7, 1e300), np.full(7, -1e300), np.full(7, 1e300))
@example(np.full(7, -1e300), panda.Q_MAX + 1.0, np.zeros(7))
def test_torques_always_finite_and_within_limits(tau, q, dq) -> None:
    f = _filter()
    out = f.filter_torque(tau, q, dq)
    assert np.all(np.isfinite(out))
    assert np.all(np.abs(out) <= panda.TAU_MAX)
    assert set(f.last_flags) == set(FLAGS)


def test_nan_target_holds_last_safe_target() -> None:
    f = _filter()
    p, r = f.filter_target(np.array([0.52, 0.0, 0.4]), np.diag([1.0, -1.0, -1.0]), LOW, np.eye(3))
    p2, r2 = f.filter_target(np.array([np.nan, 0, 0]), np.eye(3), LOW, np.eye(3))
    assert f.last_flags["nan"] and np.array_equal(p2, p) and np.array_equal(r2, r)
    p3, _ = f.filter_target(p, 2.0 * np.eye(3), LOW, np.eye(3))  # not a rotation: hold
    assert f.last_flags["nan"] and np.array_equal(p3, p)
    assert f.counts["nan"] == 2
    fresh = SafetyFilter(LOW, HIGH)  # no safe target yet: hold the measured pose
    cur = np.array([0.4, 0.1, 0.3])
    p4, r4 = fresh.filter_target(np.full(3, np.inf), np.eye(3), cur, np.eye(3))
    assert np.array_equal(p4, cur) and np.allclose(r4, np.eye(3))


def test_workspace_clamp_and_step_limit_flags() -> None:
    f = _filter()
    p, _ = f.filter_target(np.array([5.0, 0.0, 0.4]), np.diag([1.0, -1.0, -1.0]), LOW, np.eye(3))
    assert f.last_flags["workspace_clamped"] and f.last_flags["step_limited"]
    assert np.allclose(p, [0.55, 0.0, 0.4])
    big_turn = rotvec_to_mat(np.array([0.0, 0.0, 1.0])) @ np.diag([1.0, -1.0, -1.0])
    _, r = f.filter_target(p, big_turn, LOW, np.eye(3))
    assert np.isclose(np.linalg.norm(orientation_error(r, np.diag([1.0, -1.0, -1.0]))), 0.3)


def test_joint_limit_and_velocity_braking() -> None:
    f = _filter()
    q = panda.Q_HOME.copy()
    q[0] = panda.Q_MIN[0] + 0.02  # inside the 0.1 rad margin
    tau = np.full(7, -5.0)  # pushing every joint toward q_min
    out = f.filter_torque(tau, q, np.zeros(7))
    assert f.last_flags["joint_limit"]
    assert out[0] > 0  # never pushes further, springs back
    assert np.array_equal(out[1:], tau[1:])
    dq = np.zeros(7)
    dq[4] = 3.0  # above dq_max = 2.61
    out = f.filter_torque(np.full(7, 5.0), panda.Q_HOME, dq)
    assert f.last_flags["velocity_limit"] and out[4] < 0 and out[3] == 5.0
    out = f.filter_torque(np.full(7, 500.0), panda.Q_HOME, np.zeros(7))
    assert f.last_flags["torque_clipped"] and np.array_equal(out, panda.TAU_MAX)
    buf = np.zeros(7)
    assert f.filter_torque(np.zeros(7), panda.Q_HOME, np.zeros(7), out=buf) is buf
    assert not any(f.last_flags.values())


def test_invalid_construction() -> None:
    with pytest.raises(ValueError):
        SafetyFilter(HIGH, LOW)
    with pytest.raises(ValueError):
        SafetyFilter(LOW, HIGH, max_pos_step=0.0)
    with pytest.raises(ValueError):
        _filter().reset(np.full(3, np.nan), np.eye(3))

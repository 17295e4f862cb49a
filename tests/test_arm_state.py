"""ArmState: shapes, in-place filling from the kinematic chain, finiteness check."""

import numpy as np
import pytest

from controllers import panda
from controllers.arm_state import ArmState
from controllers.kinematics import panda_chain


def test_shapes_and_defaults() -> None:
    s = ArmState(7)
    assert s.q.shape == s.dq.shape == s.coriolis.shape == s.gravity.shape == (7,)
    assert s.ee_pos.shape == (3,) and s.ee_rot.shape == (3, 3)
    assert s.jac.shape == (6, 7) and s.mass.shape == (7, 7)
    assert s.is_finite()
    with pytest.raises(ValueError):
        ArmState(0)


def test_update_from_chain_fills_in_place() -> None:
    chain = panda_chain()
    rng = np.random.default_rng(0)
    s = ArmState.from_kinematics(chain, panda.Q_HOME, np.zeros(7))
    arrays = (s.q, s.dq, s.ee_pos, s.ee_rot, s.jac)
    for _ in range(5):
        q = rng.uniform(panda.Q_MIN, panda.Q_MAX)
        dq = rng.normal(size=7)
        s.update_from_chain(chain, q, dq)
        assert all(
            a is b for a, b in zip(arrays, (s.q, s.dq, s.ee_pos, s.ee_rot, s.jac), strict=True)
        )
        pos, rot = chain.forward(q)
        assert np.allclose(s.ee_pos, pos) and np.allclose(s.ee_rot, rot)
        assert np.allclose(s.jac, chain.jacobian(q))
        assert np.array_equal(s.q, q) and np.array_equal(s.dq, dq)


def test_is_finite_and_wrong_chain() -> None:
    s = ArmState(7)
    s.dq[3] = np.nan
    assert not s.is_finite()
    with pytest.raises(ValueError):
        ArmState(6).update_from_chain(panda_chain(), np.zeros(7), np.zeros(7))

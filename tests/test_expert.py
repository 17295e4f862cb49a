import numpy as np
import pytest

from controllers.rotations import mat_to_quat
from sim.env import DOWN
from sim.expert import ScriptedExpert, grasp_yaw, yaw_down
from sim.task import yaw_quat


class _Goal(ScriptedExpert):
    def __call__(self, obs):
        return self.move(obs, np.array([0.5, 0.0, 0.3]), DOWN, 1.0)


def _obs(pos):
    return {"state/ee_pos": np.asarray(pos, np.float32), "state/ee_quat": mat_to_quat(DOWN)}


def test_move_is_proportional_and_saturates():
    e = _Goal(max_dpos=0.02)
    a = e(_obs([0.49, 0.0, 0.3]))
    np.testing.assert_allclose(a[:3], [0.5, 0, 0], atol=1e-6)
    np.testing.assert_allclose(a[3:6], 0, atol=1e-6)
    assert a[6] == 1.0
    far = e(_obs([0.0, 0.0, 0.3]))
    assert far[0] == pytest.approx(1.0) and far.dtype == np.float32


def test_bias_and_noise():
    a0 = _Goal(bias=[0.1, 0, 0, 0, 0, 0, 0])(_obs([0.5, 0.0, 0.3]))
    assert a0[0] == pytest.approx(0.1)
    noisy = _Goal(noise=0.2, seed=0)
    spread = np.std([noisy(_obs([0.5, 0, 0.3]))[1] for _ in range(200)])
    assert 0.15 < spread < 0.25


def test_grasp_yaw_wraps_by_symmetry():
    for yaw in (-1.2, -0.3, 0.0, 0.5, 1.4, 3.0):
        g = grasp_yaw(yaw_quat(yaw))
        assert -np.pi / 4 - 1e-9 <= g <= np.pi / 4 + 1e-9
        assert np.isclose(np.cos(4 * (g - yaw)), 1.0)


def test_yaw_down_points_tcp_z_at_the_table():
    rot = yaw_down(0.7)
    np.testing.assert_allclose(rot[:, 2], [0, 0, -1], atol=1e-12)
    np.testing.assert_allclose(rot.T @ rot, np.eye(3), atol=1e-12)

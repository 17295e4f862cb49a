import numpy as np
import pytest

pytest.importorskip("pybullet", reason="pybullet not installed (extra 'pybullet')")

import sim
from sim.pybullet_tasks import PYBULLET_TASKS, wxyz

pytestmark = pytest.mark.pybullet


def test_quaternion_order_conversion():
    np.testing.assert_array_equal(wxyz((0.1, 0.2, 0.3, 0.9)), [0.9, 0.1, 0.2, 0.3])


@pytest.mark.parametrize("task", sorted(PYBULLET_TASKS))
def test_same_seed_places_the_same_scene_as_mujoco(task):
    pb_env, mj_env = sim.make(task, backend="pybullet"), sim.make(task)
    try:
        for seed in (0, 7):
            a, _ = pb_env.reset(seed=seed)
            b, _ = mj_env.reset(seed=seed)
            for key in pb_env.task.observation_sizes():
                np.testing.assert_allclose(a[f"state/{key}"], b[f"state/{key}"], atol=2e-3)
    finally:
        pb_env.close()


def test_lift_success_needs_the_cube_10cm_up():
    env = sim.make("lift", backend="pybullet")
    try:
        obs, _ = env.reset(seed=0)
        task, c = env.task, env.client
        assert not task.success(c, obs["state/ee_pos"])
        import pybullet as pb

        pos = obs["state/cube_pos"].astype(float)
        pb.resetBasePositionAndOrientation(
            task.cube, pos + np.array([0, 0, 0.11]), [0, 0, 0, 1], physicsClientId=c
        )
        assert task.success(c, obs["state/ee_pos"])
        assert task.dense_reward(c, pos + np.array([0, 0, 0.11])) == pytest.approx(1.0)
    finally:
        env.close()

import numpy as np
import pytest

import sim
from robotrl.evaluation import evaluate
from sim.tasks.lift import CUBE_HALF, LIFT_HEIGHT


@pytest.mark.slow
@pytest.mark.parametrize("controller", ["native", "impedance"])
def test_expert_lifts_the_cube(controller):
    env = sim.make("lift", controller=controller)
    res = evaluate(env, sim.make_expert("lift", env), 20, seed=100, progress=False)
    assert res.success_rate >= 0.95
    assert res.mean_length < 80


def test_success_is_cube_height_and_terminates():
    env = sim.make("lift", controller="native")
    expert = sim.make_expert("lift", env)
    obs, _ = env.reset(seed=0)
    expert.reset()
    for _ in range(env.max_episode_steps):
        obs, reward, terminated, _, info = env.step(expert(obs))
        if terminated:
            break
    assert terminated and info["success"] and reward == 1.0
    assert obs["state/cube_pos"][2] > CUBE_HALF + LIFT_HEIGHT


def test_cube_placement_follows_randomisation_range():
    env = sim.make("lift", controller="native", randomize={"object_pos": 0.0, "object_yaw": 0.0})
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        np.testing.assert_allclose(obs["state/cube_pos"], [0.5, 0.0, CUBE_HALF], atol=1e-6)
        np.testing.assert_allclose(obs["state/cube_quat"], [1, 0, 0, 0], atol=1e-6)


def test_biased_expert_is_worse():
    env = sim.make("lift", controller="native")
    bias = np.array([0.0, 0.6, 0.0, 0.0, 0.0, 0.0, 0.0])
    res = evaluate(env, sim.make_expert("lift", env, bias=bias), 10, seed=0, progress=False)
    assert res.success_rate <= 0.5

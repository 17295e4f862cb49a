import numpy as np

import sim
from robotrl.evaluation import evaluate
from sim.tasks.reach import GOAL_TOLERANCE


def test_expert_reaches_every_goal():
    env = sim.make("reach", controller="native")
    res = evaluate(env, sim.make_expert("reach", env), 20, seed=0, progress=False)
    assert res.success_rate == 1.0


def test_dense_reward_grows_as_the_tcp_approaches():
    env = sim.make("reach", controller="native", reward_type="dense", terminate_on_success=False)
    expert = sim.make_expert("reach", env)
    obs, _ = env.reset(seed=1)
    rewards = []
    for _ in range(40):
        obs, r, *_ = env.step(expert(obs))
        rewards.append(r)
    assert rewards[-1] > rewards[0]
    assert np.linalg.norm(obs["state/ee_pos"] - obs["state/goal_pos"]) < GOAL_TOLERANCE

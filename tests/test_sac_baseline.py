import numpy as np

import sim
from robotrl.benchmarks.sac_baseline import FlattenState, run_sac


def test_flatten_state_concatenates_in_order():
    env = FlattenState(sim.make("reach"), ["state/goal_pos", "state/ee_pos"])
    obs, _ = env.reset(seed=0)
    raw = env.unwrapped.observe()
    np.testing.assert_allclose(obs, np.r_[raw["state/goal_pos"], raw["state/ee_pos"]])
    assert env.observation_space.shape == (6,)


def test_sac_runs_and_reports_a_curve():
    out = run_sac(
        "reach",
        ["state/ee_pos", "state/goal_pos"],
        120,
        eval_every=60,
        eval_episodes=1,
        learning_starts=50,
    )
    assert out["env_steps"] == 120 and len(out["curve"]) == 2
    assert 0.0 <= out["final_success"] <= 1.0

import numpy as np
import pytest

import sim
from robotrl.evaluation import evaluate
from sim.tasks.peg_insert import HOLE_DEPTH, HOLE_HALF, PEG_HALF


def test_clearance_is_one_millimetre():
    assert 2 * (HOLE_HALF - PEG_HALF) == pytest.approx(0.001)


@pytest.mark.slow
@pytest.mark.parametrize("controller", ["native", "impedance"])
def test_expert_inserts_the_peg(controller):
    env = sim.make("peg_insert", controller=controller)
    res = evaluate(env, sim.make_expert("peg_insert", env), 20, seed=100, progress=False)
    assert res.success_rate >= 0.95


def test_peg_starts_in_the_hand_and_stays_there_when_holding():
    env = sim.make("peg_insert", controller="native")
    obs, _ = env.reset(seed=0)
    offset = obs["state/peg_pos"] - obs["state/ee_pos"]
    hold = np.zeros(7, np.float32)
    hold[6] = 1.0
    for _ in range(20):
        obs = env.step(hold)[0]
    np.testing.assert_allclose(obs["state/peg_pos"] - obs["state/ee_pos"], offset, atol=3e-3)


def test_peg_pushed_onto_the_block_top_is_not_a_success():
    env = sim.make("peg_insert", controller="native", randomize={"object_pos": 0.0})
    obs, _ = env.reset(seed=0)
    in_hand = obs["state/peg_pos"] - obs["state/ee_pos"]
    a = np.zeros(7, np.float32)
    a[6] = 1.0
    # Go over the block's solid wall, 3 cm off the hole centre, and push down.
    for _ in range(60):
        goal = obs["state/hole_pos"] + np.array([0.032, 0.0, 0.06])
        a[:3] = np.clip((goal - obs["state/ee_pos"]) / 0.02, -1, 1)
        if np.linalg.norm(goal[:2] - obs["state/ee_pos"][:2]) < 0.003:
            a[2] = -1.0
        obs, _, _, _, info = env.step(a)
    assert not info["success"]
    assert obs["state/wrench"][2] > 30.0  # pressing with most of the 40 N force bound
    assert env.task.peg_bottom(env.data)[2] > HOLE_DEPTH - 0.001  # stiff contact: < 1 mm
    slip = obs["state/peg_pos"] - obs["state/ee_pos"] - in_hand
    assert np.abs(slip).max() < 0.003  # the 70 N grasp holds the peg

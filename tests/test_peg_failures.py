"""The peg_insert failure modes: the classification of an episode's record, the peg's lower end
from its pose, the scripted expert's episodes are aligned successes, a policy that holds still
never touches down, and bad arguments are refused."""

import numpy as np
import pytest

import sim
from robotrl.benchmarks.peg_failures import (
    ALIGNED,
    PegRecord,
    classify,
    peg_bottom,
    peg_failures,
)
from sim.tasks.peg_insert import PEG_HALF_LEN


@pytest.mark.parametrize(
    ("record", "mode"),
    [
        (PegRecord(True, 0.0004, 60, 64), "success"),
        (PegRecord(False, 0.0005, 60, 120), "entered_short"),
        (PegRecord(False, 0.003, 55, 120), "touched_off"),
        (PegRecord(False, None, None, 120), "never_touched"),
    ],
)
def test_a_record_gets_its_mode(record, mode) -> None:
    assert classify(record) == mode


def test_the_lower_end_of_an_upright_or_upside_down_peg() -> None:
    pos = np.array([0.5, 0.1, 0.2])
    upright = {"state/peg_pos": pos, "state/peg_quat": np.array([1.0, 0.0, 0.0, 0.0])}
    flipped = {"state/peg_pos": pos, "state/peg_quat": np.array([0.0, 1.0, 0.0, 0.0])}
    for obs in (upright, flipped):
        np.testing.assert_allclose(peg_bottom(obs), pos - [0.0, 0.0, PEG_HALF_LEN], atol=1e-12)


class _Expert:
    """The scripted peg_insert expert, or a policy that holds still (an episode policy)."""

    def __init__(self, env, hold: bool = False) -> None:
        self.expert, self.hold = sim.make_expert("peg_insert", env), hold

    def reset(self) -> None:
        self.expert.reset()

    def __call__(self, obs):
        return np.r_[np.zeros(6), 1.0] if self.hold else self.expert(obs)


@pytest.fixture(scope="module")
def env():
    e = sim.make("peg_insert")
    yield e
    e.close()


def test_the_experts_episodes_touch_down_aligned_and_succeed(env) -> None:
    out = peg_failures(env, _Expert(env), episodes=2, seed=0)
    assert out["modes"] == {"success": 2} and out["success_rate"] == 1.0
    assert out["touch_xy_mm"]["failure"] is None
    assert out["touch_xy_mm"]["success"][2] < ALIGNED * 1000


def test_a_policy_that_holds_still_never_touches_down(env) -> None:
    out = peg_failures(env, _Expert(env, hold=True), episodes=1, seed=0)
    assert out["modes"] == {"never_touched": 1} and out["touch_step_median"] is None


@pytest.mark.parametrize(("episodes", "std"), [(0, 0.0), (1, -0.1), (1, float("nan"))])
def test_bad_arguments_are_refused(env, episodes, std) -> None:
    with pytest.raises(ValueError, match="must be"):
        peg_failures(env, _Expert(env), episodes=episodes, seed=0, noise_std=std)

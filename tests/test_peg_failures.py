"""The peg_insert failure modes: the classification of an episode's record, the peg's lower end
from its pose, the scripted expert's episodes are aligned successes, a policy that holds still
never touches down, the servo's correction and what it does for a misaimed policy, and bad
arguments are refused."""

import numpy as np
import pytest

import sim
from robotrl.benchmarks.peg_failures import (
    ALIGNED,
    SERVO_BOUND,
    SERVO_ZONE,
    PegRecord,
    Perturbation,
    classify,
    peg_bottom,
    peg_failures,
    servo,
)
from sim.tasks.peg_insert import HOLE_DEPTH, PEG_HALF_LEN


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


def _peg_over_hole(tip_height: float, offset_xy: tuple[float, float]) -> tuple:
    """(the peg's lower end, the hole's centre) [m] with the tip this far above and off it."""
    hole = np.array([0.55, 0.0, HOLE_DEPTH])
    return hole + np.array([*offset_xy, tip_height]), hole


def test_the_servo_corrects_a_fraction_of_the_offset_within_the_bound_near_the_block() -> None:
    near = _peg_over_hole(0.01, (0.001, -0.0005))  # tip 1 mm +x, 0.5 mm -y of the centre
    np.testing.assert_allclose(servo(*near, 0.5, 0.02), [-0.025, 0.0125], atol=1e-9)
    far_off = _peg_over_hole(0.01, (0.02, -0.02))
    np.testing.assert_allclose(servo(*far_off, 1.0, 0.02), [-SERVO_BOUND, SERVO_BOUND])
    high = _peg_over_hole(SERVO_ZONE + 0.005, (0.001, 0.0))
    assert not servo(*high, 1.0, 0.02).any()


class _Expert:
    """The scripted peg_insert expert, or a policy that holds still (an episode policy)."""

    def __init__(self, env, hold: bool = False, aim_off: float = 0.0, yaw: float = 0.0) -> None:
        self.expert, self.hold = sim.make_expert("peg_insert", env), hold
        self.aim_off = aim_off  # [m] along x: the expert aims at a hole this far off
        self.yaw = yaw  # not 0: every action's rotation is this about z [action units]: a spin

    def reset(self) -> None:
        self.expert.reset()

    def __call__(self, obs):
        if self.hold:
            return np.r_[np.zeros(6), 1.0]
        seen = {**obs, "state/hole_pos": obs["state/hole_pos"] + [self.aim_off, 0.0, 0.0]}
        action = self.expert(seen)
        if self.yaw:
            action[3:6] = [0.0, 0.0, self.yaw]
        return action


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


def test_the_servo_pulls_a_misaimed_policys_touchdown_towards_the_centre(env) -> None:
    misaimed = _Expert(env, aim_off=0.0025)
    alone = peg_failures(env, misaimed, episodes=1, seed=0)
    served = peg_failures(env, misaimed, episodes=1, seed=0, change=Perturbation(servo_gain=1.0))
    assert alone["modes"] == {"touched_off": 1}
    served_mm = next(mm for mm in served["touch_xy_mm"].values() if mm)[1]  # success or not
    assert served_mm < 0.6 * alone["touch_xy_mm"]["failure"][1]


def test_the_experts_rotation_undoes_a_policys_spin(env) -> None:
    spinning = _Expert(env, yaw=0.3)
    alone = peg_failures(env, spinning, episodes=1, seed=0)
    fixed = peg_failures(
        env, spinning, episodes=1, seed=0, change=Perturbation(expert_rotation=True)
    )
    assert alone["success_rate"] == 0.0 and fixed["success_rate"] == 1.0


@pytest.mark.parametrize(("episodes", "std"), [(0, 0.0), (1, -0.1), (1, float("nan"))])
def test_bad_arguments_are_refused(env, episodes, std) -> None:
    with pytest.raises(ValueError, match="must be"):
        change = Perturbation(noise_std=std)
        peg_failures(env, _Expert(env), episodes=episodes, seed=0, change=change)
    with pytest.raises(ValueError, match="servo_gain must be"):
        Perturbation(servo_gain=-std - 1.0)

"""GraspHold: a loosening command is raised to closed only while an object is held above the
release height; an empty gripper opens freely; bad parameters are refused."""

import math

import pytest

from controllers.grasp_hold import GraspHold

PEG = 0.024  # finger opening [m] on a held peg


def test_a_noisy_command_keeps_the_peg_gripped_above_the_release_height():
    hold = GraspHold(release_z=0.08)
    hold.reset(1.0)
    assert hold(0.2, PEG, 0.30) == 1.0 and hold(-1.0, PEG, 0.30) == 1.0
    assert hold.holds == 2
    assert hold(0.2, PEG, 0.07) == 0.2  # low enough to put it down: passes
    assert hold(1.0, PEG, 0.30) == 1.0 and hold.holds == 2  # a closing command is no hold


def test_an_empty_or_open_gripper_and_an_open_command_are_not_holding():
    hold = GraspHold(release_z=0.08)
    hold.reset(1.0)
    assert hold(-1.0, 0.0, 0.30) == -1.0  # closed on nothing: opens
    assert hold(-1.0, 0.04, 0.30) == -1.0  # opening under an open command: not a grasp
    hold.reset(-1.0)
    assert hold(0.3, 0.08, 0.30) == 0.3  # open fingers
    assert hold.holds == 0


def test_a_non_finite_command_closes_a_held_grasp_and_is_neutral_otherwise():
    hold = GraspHold(release_z=0.08)
    hold.reset(1.0)
    assert hold(math.nan, PEG, 0.30) == 1.0
    hold.reset(-1.0)
    assert hold(math.inf, 0.08, 0.30) == 0.0


@pytest.mark.parametrize(
    "kw",
    [
        {"release_z": math.nan},
        {"release_z": 0.1, "min_width": 0.05, "max_width": 0.01},
        {"release_z": 0.1, "close": 0.0},
        {"release_z": 0.1, "close": 1.5},
    ],
)
def test_bad_parameters_are_refused(kw):
    with pytest.raises(ValueError):
        GraspHold(**kw)

"""Steerability: a base that ignores its noise is rescued nowhere, one that follows it is rescued
where a held draw cancels its bias; the summary's counts and ceiling."""

from __future__ import annotations

import numpy as np
import pytest
from toy import PointGoal, SteerablePointBase

from robotrl.benchmarks.steerability import neighbour_choice, steerability, summary


def test_the_summary_counts_rescues_ceiling_and_each_draws_success():
    wins = [
        [True, False, False],  # succeeds from the mean
        [False, True, False],  # rescued by draw 1
        [False, False, False],  # not rescued
        [False, True, True],  # rescued by both
    ]
    out = summary(wins, seed=10)
    assert out["mean_noise_success"] == 0.25
    assert (out["failed_from_mean_noise"], out["rescued_by_some_noise"]) == (3, 2)
    assert out["ceiling"] == 0.75
    assert out["held_noise_success"] == [0.5, 0.25] and out["best_held_noise_success"] == 0.5
    assert out["per_failed_state"] == [
        {"seed": 11, "successes": 1},
        {"seed": 12, "successes": 0},
        {"seed": 13, "successes": 2},
    ]


def test_the_neighbours_choice_follows_a_map_from_the_state_and_not_a_lottery():
    x = np.random.default_rng(1).uniform(-1, 1, (40, 1))
    mapped = np.zeros((40, 3), bool)
    mapped[x[:, 0] < 0, 1] = True  # draw 1 rescues the left half, draw 2 the right
    mapped[x[:, 0] >= 0, 2] = True
    mapped_choice = neighbour_choice(x, mapped, 3)
    assert mapped_choice >= 0.9  # wrong at most at the states by the border
    lottery = np.random.default_rng(0).random((40, 3)) < 0.3  # no state tells which wins
    assert neighbour_choice(x, lottery, 3) < 0.6 < lottery.any(axis=1).mean()
    # a constant feature is dropped, not divided by zero
    assert neighbour_choice(np.hstack([x, np.ones((40, 1))]), mapped, 3) == mapped_choice
    with pytest.raises(ValueError, match="neighbours"):
        neighbour_choice(x, mapped, 0)


def test_a_base_blind_to_its_noise_is_rescued_nowhere():
    env = PointGoal(horizon=20)
    out = steerability(env, SteerablePointBase(noise_gain=0.0), 4, states=6, noises=4)
    assert out["failed_from_mean_noise"] == 5 and out["rescued_by_some_noise"] == 0
    assert out["ceiling"] == out["mean_noise_success"] == 1 / 6
    assert out["held_noise_success"] == [1 / 6] * 4  # every draw does what the mean does
    assert out["neighbour_choice_success"] == 1 / 6  # ties choose the mean noise


def test_a_base_that_follows_its_noise_is_rescued_where_a_draw_cancels_its_bias():
    env = PointGoal(horizon=20)
    episodes = []
    out = steerability(
        env, SteerablePointBase(noise_gain=0.5), 4, states=6, noises=16,
        on_episode=lambda: episodes.append(1),
    )  # fmt: skip
    # the same states as above; a draw near -bias / noise_gain cancels the bias everywhere
    assert out["mean_noise_success"] == 1 / 6 and out["rescued_by_some_noise"] == 5
    assert out["ceiling"] == 1.0 and out["best_held_noise_success"] == 1.0
    assert out["neighbour_choice_success"] == 1.0  # the cancelling draw wins at every neighbour
    assert len(episodes) == 6 * 17


def test_no_states_or_no_noises_is_refused():
    with pytest.raises(ValueError, match="states and noises"):
        steerability(PointGoal(), SteerablePointBase(), 4, states=0, noises=8)

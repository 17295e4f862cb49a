"""The success potential and the actor fitted to it: a peg_insert observation's state vector, Φ
ranks aligned states above misaligned ones and reads the peg relative to the hole, the actor's
correction points at the hole and stays at zero when corrections are priced above Φ's gain,
policy iteration lifts a policy that never aims within its budget and keeps its best actor, the
actor saved as a residual acts the same after loading, and bad input is refused.

A toy peg env stands in for peg_insert: the peg starts a few millimetres off the hole and comes
down in ten steps; the episode succeeds when it arrives within 1.5 mm."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

import sim
from policies.checkpoint import CheckpointError
from robotrl.algos import success_potential as sp
from robotrl.algos.success_potential import (
    FEATURE_DIM,
    HOLE,
    PEG,
    STATE_DIM,
    STATE_KEYS,
    PotentialActor,
    PotentialConfig,
    PotentialResidual,
    SuccessPotential,
    fit_actor,
    fit_potential,
    load_potential,
    moved,
    policy_iteration,
    rollouts,
    save_potential,
    state_vector,
)

START_MM, TOLERANCE_MM, STEPS = 4.0, 1.5, 10


class ToyPeg:
    """Peg x-y offset from the hole uniform in +-4 mm; actions move it by action * 2 cm."""

    max_dpos = 0.02  # [m per action unit]

    def reset(self, seed: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        rng = np.random.default_rng(seed)
        self.xy = rng.uniform(-START_MM, START_MM, 2) / 1000
        self.t = 0
        return self._obs(), {}

    def _obs(self) -> dict[str, np.ndarray]:
        obs = {k: np.zeros(3 if k.endswith("_pos") else 6, np.float32) for k in STATE_KEYS}
        obs["state/peg_pos"] = np.array([*self.xy, 0.05 - 0.005 * self.t], np.float32)
        return obs

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        self.xy = self.xy + np.asarray(action[:2]) * self.max_dpos
        self.t += 1
        done = self.t == STEPS
        ok = done and float(np.linalg.norm(self.xy)) < TOLERANCE_MM / 1000
        return self._obs(), float(ok), ok, done and not ok, {"success": ok}


class Still:
    """A policy that never aims."""

    def reset(self) -> None:
        pass

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros(7, np.float32)


@pytest.fixture(scope="module")
def phi() -> SuccessPotential:
    """Φ of the still policy's toy episodes (about a tenth succeed)."""
    return fit_potential(rollouts(ToyPeg(), Still(), 300, seed=0), steps=200)


def test_a_peg_insert_observation_is_one_state_vector() -> None:
    env = sim.make("peg_insert")
    obs, _ = env.reset(seed=0)
    env.close()
    state = state_vector(obs)
    assert state.shape == (STATE_DIM,)
    assert np.allclose(state[PEG], obs["state/peg_pos"])


def test_a_state_without_the_peg_or_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(ValueError, match="peg_insert"):
        state_vector({"state/ee_twist": np.zeros(6)})
    short = {k: np.zeros(3) for k in STATE_KEYS}
    with pytest.raises(ValueError, match="expected"):
        state_vector(short)


def test_the_potential_ranks_aligned_states_above_misaligned_ones(phi: SuccessPotential) -> None:
    state = state_vector(ToyPeg().reset(0)[0])
    aligned, off = state.copy(), state.copy()
    aligned[PEG.start : PEG.start + 2] = 0.0
    off[PEG.start : PEG.start + 2] = [0.004, 0.0]
    assert phi.probability(aligned) > phi.probability(off) + 0.2


def test_the_potential_reads_the_peg_relative_to_the_hole_not_where_the_hole_is(
    phi: SuccessPotential,
) -> None:
    state = state_vector(ToyPeg().reset(0)[0])
    shifted = state.copy()
    shifted[PEG] += [0.05, -0.03, 0.0]
    shifted[HOLE] += [0.05, -0.03, 0.0]
    assert np.isclose(phi.probability(shifted), phi.probability(state), atol=1e-6)


def test_the_actor_points_at_the_hole_and_stays_still_when_corrections_cost_more(
    phi: SuccessPotential,
) -> None:
    episodes = rollouts(ToyPeg(), Still(), 30, seed=1)
    state = state_vector(ToyPeg().reset(0)[0])
    state[PEG.start : PEG.start + 2] = [0.003, 0.0]
    actor = fit_actor(phi, episodes, ToyPeg.max_dpos, PotentialConfig(kappa=0.0, actor_steps=300))
    dx, dy = actor.correction(state)
    assert dx < -0.02 and abs(dy) < abs(dx)
    costly = fit_actor(phi, episodes, ToyPeg.max_dpos, PotentialConfig(kappa=5.0, actor_steps=300))
    assert np.abs(costly.correction(state)).max() < 0.005


def test_a_correction_moves_the_peg_by_the_envs_translation_per_action_unit() -> None:
    state = torch.zeros(STATE_DIM)
    out = moved(state, torch.tensor([0.5, -0.25]), max_dpos=0.02)
    assert torch.allclose(out[PEG], torch.tensor([0.01, -0.005, 0.0]))
    assert torch.count_nonzero(out) == 2


QUICK = PotentialConfig(
    iterations=2, base_episodes=300, episodes_per_iteration=20, noise_std=0.0,
    potential_steps=200, actor_steps=300,
)  # fmt: skip


def test_policy_iteration_lifts_a_policy_that_never_aims_and_keeps_the_best_actor() -> None:
    run = policy_iteration(ToyPeg(), Still(), QUICK, eval_episodes=50)
    rows = run.evaluations
    assert [r["env_steps"] for r in rows] == [0, 300 * STEPS, 320 * STEPS]
    assert rows[1]["success_rate"] > rows[0]["success_rate"] + 0.3
    assert len(run.actors) == 2 and run.env_steps == 320 * STEPS
    assert [e["env_steps"] for e in run.episodes[:2]] == [STEPS, 2 * STEPS]
    kept = 1 if rows[1]["success_rate"] > rows[2]["success_rate"] else 2
    assert run.agent is run.actors[kept - 1] and run.kept_step == rows[kept]["env_steps"]


@pytest.mark.parametrize(("keep_best", "kept"), [(True, 1), (False, 2)])
def test_the_kept_actor_is_the_best_evaluations_or_the_last(monkeypatch, keep_best, kept) -> None:
    rates = iter([0.1, 0.9, 0.5])  # the base, iteration 1, iteration 2
    monkeypatch.setattr(sp, "evaluate", lambda *a, **k: SimpleNamespace(success_rate=next(rates)))
    run = policy_iteration(ToyPeg(), Still(), QUICK, keep_best=keep_best)
    assert run.agent is run.actors[kept - 1] and run.kept_step == run.evaluations[kept]["env_steps"]


class FarPeg(ToyPeg):
    """The toy peg always starting 4 mm off in x and y: the still policy never succeeds."""

    def reset(self, seed: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed)
        self.xy = np.full(2, START_MM / 1000)
        return self._obs(), {}


def test_data_of_one_outcome_ends_the_run_with_the_base_kept() -> None:
    run = policy_iteration(FarPeg(), Still(), QUICK, eval_episodes=5)
    assert run.ended == "all 300 rollouts failed: Φ has nothing to tell apart"
    assert run.actors == [] and len(run.evaluations) == 1
    state = state_vector(FarPeg().reset(0)[0])
    assert np.all(run.agent.correction(state) == 0.0)
    cut = policy_iteration(FarPeg(), Still(), QUICK, eval_episodes=5, total_steps=30)
    assert cut.ended.endswith("(raise total_steps=30)") and cut.env_steps == 30


def test_the_budget_ends_the_data_and_the_iterations() -> None:
    run = policy_iteration(ToyPeg(), Still(), QUICK, eval_episodes=10, total_steps=995)
    assert run.env_steps == 100 * STEPS  # the episode that passes 995 steps is the last
    assert len(run.evaluations) == 2 and len(run.actors) == 1
    assert run.ended == "total_steps=995 spent after 1 of 2 iterations"


def test_the_run_ends_at_the_first_evaluation_that_reaches_the_target() -> None:
    met = policy_iteration(ToyPeg(), Still(), QUICK, eval_episodes=10, target_success=0.0)
    assert met.steps_to_target == 0 and met.env_steps == 0 and met.actors == []
    run = policy_iteration(ToyPeg(), Still(), QUICK, eval_episodes=50, target_success=0.5)
    assert len(run.actors) == 1 and run.steps_to_target == 300 * STEPS


def test_a_stopped_run_keeps_the_base() -> None:
    stop = threading.Event()
    stop.set()
    run = policy_iteration(ToyPeg(), Still(), QUICK, eval_episodes=5, stop=stop)
    assert run.interrupted and run.actors == [] and run.env_steps == 0
    assert run.ended == "stopped on request"
    state = state_vector(ToyPeg().reset(0)[0])
    assert np.all(run.agent.correction(state) == 0.0)  # a still actor: the base alone


def test_the_actor_saved_as_a_residual_acts_the_same_after_loading(
    phi: SuccessPotential, tmp_path
) -> None:
    episodes = rollouts(ToyPeg(), Still(), 30, seed=1)
    actor = fit_actor(phi, episodes, ToyPeg.max_dpos, PotentialConfig(actor_steps=50))
    agent = PotentialResidual(actor, act_dim=7)
    states = np.stack([state_vector(ToyPeg().reset(s)[0]) for s in range(4)])
    base = np.full((4, 7), 0.99, np.float32)
    executed, residual = agent.act(states, base)
    assert np.all(residual[:, 2:] == 0.0) and np.allclose(residual[:, :2], actor(
        torch.from_numpy(states)).detach().numpy())  # fmt: skip
    assert executed.max() <= 1.0 and np.allclose(executed, np.clip(base + residual, -1, 1))
    loaded, meta = load_potential(save_potential(agent, tmp_path / "ckpt", {"task": "toy"}))
    assert meta == {"task": "toy"} and loaded.act_dim == 7
    assert np.array_equal(loaded.act(states, base)[1], residual)


def test_data_of_one_outcome_and_bad_settings_are_refused(tmp_path) -> None:
    failures = [(np.zeros((3, STATE_DIM), np.float32), False)] * 4
    with pytest.raises(ValueError, match="all 4 failed"):
        fit_potential(failures, steps=1)
    with pytest.raises(ValueError, match="bound > 0"):
        PotentialConfig(bound=0.0)
    with pytest.raises(ValueError, match="counts >= 1"):
        PotentialConfig(iterations=0)
    with pytest.raises(ValueError, match="finite"):
        PotentialConfig(kappa=float("nan"))
    with pytest.raises(ValueError, match="eval_episodes must be >= 1"):
        policy_iteration(ToyPeg(), Still(), QUICK, eval_episodes=0)
    actor = PotentialActor(np.zeros(FEATURE_DIM), np.ones(FEATURE_DIM), bound=0.05)
    with pytest.raises(ValueError, match="at least 2 entries"):
        PotentialResidual(actor, act_dim=1)
    (tmp_path / "other").mkdir()
    with pytest.raises(CheckpointError, match="no success-potential checkpoint"):
        load_potential(tmp_path / "other")

"""The critic-ranking benchmark: candidate 0 is the policy's own action, the critic rule executes
the candidate its heads rank highest, the random rule one of the candidates; bad options are
refused; with no perturbation both rules repeat the policy's episodes."""

import numpy as np
import pytest
import torch
from tiny_reach import reach_demos, tiny_checkpoint
from torch import nn

import sim
from policies.checkpoint import load_policy
from policies.registry import set_noise_scale
from robotrl.algos.residual import ResidualAgent, ResidualConfig, StateFeaturizer
from robotrl.algos.residual_policy import ResidualPolicy
from robotrl.benchmarks.critic_ranking import CandidateChoice, critic_ranking

KEYS = ["state/ee_pos", "state/goal_pos"]


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("critic_ranking")
    return tiny_checkpoint(root, reach_demos(root))


def _policy(base_dir: str) -> ResidualPolicy:
    """A fresh residual (zero output) on the tiny reach base, from its mean noise."""
    base, _ = load_policy(base_dir)
    set_noise_scale(base, 0.0)
    agent = ResidualAgent(6, 7, ResidualConfig(hidden=16, ensemble=3, scale=0.3), seed=0)
    stats = {k: {"mean": np.zeros(3), "std": np.ones(3)} for k in KEYS}
    return ResidualPolicy(agent, base, StateFeaturizer(KEYS, stats), execute_horizon=4)


class _PreferX(nn.Module):
    """Critic stub of 3 heads: Q(s, a) = -(a_x - 0.1)^2 for every head, (E, B)."""

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return (-((action[:, 0] - 0.1) ** 2))[None].expand(3, -1)


def test_candidate_zero_is_the_policys_own_action(base_dir):
    obs, _ = sim.make("reach").reset(seed=0)
    policy = _policy(base_dir)
    _, actions = CandidateChoice(_policy(base_dir), 0.2, 5, "random", seed=1).candidates(obs)
    np.testing.assert_allclose(actions[0].numpy(), policy(obs), atol=1e-6)
    assert actions.shape == (5, 7) and not torch.allclose(actions[1], actions[0])
    assert float((actions - actions[0]).abs().max()) <= 0.3 + 1e-6  # the residual's bound


def test_the_critic_rule_executes_the_candidate_its_heads_rank_highest(base_dir):
    obs, _ = sim.make("reach").reset(seed=0)
    peek = CandidateChoice(_policy(base_dir), 0.2, 8, "critic", seed=3)
    _, actions = peek.candidates(obs)  # the same draws as `choice` below (same seed, step)
    best = actions[int((actions[:, 0] - 0.1).abs().argmin())]
    policy = _policy(base_dir)
    policy.agent.critic = _PreferX()
    choice = CandidateChoice(policy, 0.2, 8, "critic", seed=3)
    np.testing.assert_allclose(choice(obs), best.numpy(), atol=1e-6)
    pick = CandidateChoice(_policy(base_dir), 0.2, 8, "random", seed=3)(obs)
    assert any(np.allclose(pick, a, atol=1e-6) for a in actions.numpy())


def test_bad_options_are_refused(base_dir):
    policy = _policy(base_dir)
    with pytest.raises(ValueError, match="rule must be one of"):
        CandidateChoice(policy, 0.1, 4, "best")
    with pytest.raises(ValueError, match="candidates >= 1"):
        CandidateChoice(policy, 0.1, 0, "random")
    with pytest.raises(ValueError, match="sigma >= 0"):
        CandidateChoice(policy, -0.1, 4, "random")


def test_without_perturbation_both_rules_repeat_the_policys_episodes(base_dir):
    out = critic_ranking(
        _policy(base_dir), "reach", {}, episodes=2, seed=5, candidates=3, sigmas=[0.0]
    )
    assert out["sigma=0.0"] == {"random": out["policy"], "critic": out["policy"]}

"""Residual RL: step 0 is the base, the TD3 learner's pieces, and it learns on a biased base."""

import numpy as np
import pytest
import torch

from robotrl.algos.residual import ResidualAgent, ResidualConfig, StateFeaturizer
from robotrl.algos.residual_training import warmup_actions


def _agent(**kw):
    return ResidualAgent(4, 2, ResidualConfig(hidden=32, ensemble=4, **kw), seed=0)


def test_step_zero_executes_the_base_policy():
    agent = _agent()
    obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    base = np.random.default_rng(1).uniform(-1, 1, (16, 2)).astype(np.float32)
    a, res = agent.act(obs, base, explore=False)
    np.testing.assert_array_equal(res, 0.0)
    np.testing.assert_array_equal(a, base)


def test_residual_is_bounded_by_scale_and_exploration_by_two_std():
    agent = _agent(scale=0.1, explore_std=0.05)
    with torch.no_grad():
        agent.actor[-1].weight.normal_(0, 10.0)
    obs = np.random.default_rng(0).normal(size=(256, 4)).astype(np.float32)
    base = np.zeros((256, 2), np.float32)
    _, res = agent.act(obs, base, explore=False)
    assert np.abs(res).max() <= 0.1 + 1e-6 and np.abs(res).max() > 0.09
    a, res = agent.act(obs, base, explore=True, rng=np.random.default_rng(0))
    assert np.abs(a - res).max() <= 0.1 + 1e-6


def _batch(rng, b=64, reward=1.0, discount=0.0):
    f = lambda: rng.normal(size=(b, 4)).astype(np.float32)  # noqa: E731
    g = lambda: rng.uniform(-1, 1, (b, 2)).astype(np.float32)  # noqa: E731
    return {
        "obs": {"features": f(), "base_action": g()},
        "action": g(),
        "reward": np.full(b, reward, np.float32),
        "discount": np.full(b, discount, np.float32),
        "next_obs": {"features": f(), "base_action": g()},
    }


def test_critic_regresses_to_terminal_rewards():
    agent = _agent(critic_lr=1e-3)
    rng = np.random.default_rng(0)
    batch = _batch(rng, reward=1.0, discount=0.0)  # terminal: y = r exactly
    for _ in range(300):
        logs = agent.update(batch, update_actor=False)
    assert logs["critic_loss"] < 1e-2 and abs(logs["q_mean"] - 1.0) < 0.05


def test_actor_climbs_the_critic_and_targets_track():
    agent = _agent(actor_lr=1e-2)
    rng = np.random.default_rng(0)
    batch = _batch(rng)
    before = [p.clone() for p in agent.actor_target.parameters()]
    obs = torch.from_numpy(batch["obs"]["features"])
    base = torch.from_numpy(batch["obs"]["base_action"])
    q0 = agent.critic(obs, (base + agent.residual(obs, base)).clamp(-1, 1)).mean().item()
    for _ in range(50):
        agent.update(batch, update_actor=True)
    q1 = agent.critic(obs, (base + agent.residual(obs, base)).clamp(-1, 1)).mean().item()
    assert q1 > q0
    moved = [
        (a - b).abs().max().item()
        for a, b in zip(agent.actor_target.parameters(), before, strict=True)
    ]
    assert max(moved) > 0


@pytest.mark.parametrize("base_input", [True, False])
def test_base_input_decides_whether_the_residual_follows_the_base_action(base_input):
    agent = _agent(scale=0.5, base_input=base_input)
    with torch.no_grad():
        agent.actor[-1].weight.normal_(0, 1.0)
    rng = np.random.default_rng(0)
    obs = torch.from_numpy(rng.normal(size=(32, 4)).astype(np.float32))
    b1, b2 = (torch.from_numpy(rng.uniform(-1, 1, (32, 2)).astype(np.float32)) for _ in "ab")
    diff = (agent.residual(obs, b1) - agent.residual(obs, b2)).abs().max().item()
    assert (diff > 1e-3) if base_input else (diff == 0.0)


def _off_data_gap(agent, batch):
    """Mean Q(s, a_data + 0.3 box noise) - Q(s, a_data) over heads and batch."""
    obs = torch.from_numpy(batch["obs"]["features"])
    act = torch.from_numpy(batch["action"])
    off = (act + 0.3 * (2 * torch.rand(act.shape) - 1)).clamp(-1, 1)
    with torch.no_grad():
        return (agent.critic(obs, off) - agent.critic(obs, act)).mean().item()


def test_cql_makes_the_critic_conservative_away_from_the_data_actions():
    gaps = {}
    for cql in (0.0, 2.0):
        torch.manual_seed(0)
        agent = _agent(critic_lr=1e-3, scale=0.3, cql=cql, cql_samples=8)
        batch = _batch(np.random.default_rng(0), b=128, reward=0.5, discount=0.0)
        batch["action"] = batch["obs"]["base_action"].copy()  # data: the base's actions
        for _ in range(300):
            logs = agent.update(batch, update_actor=False)
        assert abs(logs["q_mean"] - 0.5) < 0.15 and ("cql_gap" in logs) == (cql > 0)
        gaps[cql] = _off_data_gap(agent, batch)
    assert abs(gaps[0.0]) < 0.02 and gaps[2.0] < -0.06


class _LinearHeads(torch.nn.Module):
    """Critic heads ``Q_e(s, a) = w_e * a_0``: they agree at a_0 = 0 and disagree off it."""

    def __init__(self, w):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(w))

    def forward(self, obs, action):
        return self.w[:, None] * action[None, :, 0]


@pytest.mark.parametrize("pessimism", [0.0, 2.0])
def test_pessimism_holds_the_residual_where_the_heads_disagree(pessimism):
    agent = _agent(actor_lr=1e-2, scale=0.5, residual_l2=0.0, pessimism=pessimism)
    agent.critic = _LinearHeads([0.2, 1.8, -0.4, 2.4])  # mean slope 1.0, std 1.3
    agent.critic_target = _LinearHeads([0.2, 1.8, -0.4, 2.4])
    batch = _batch(np.random.default_rng(0), b=128)
    batch["obs"]["base_action"][:] = 0.0
    for _ in range(300):
        agent.update(batch, update_actor=True)
    obs = torch.from_numpy(batch["obs"]["features"])
    res = agent.residual(obs, torch.zeros(128, 2)).detach().numpy()[:, 0]
    if pessimism == 0.0:  # the mean climbs to the bound
        assert res.mean() > 0.45
    else:  # mean - 2 std = a_0 (1.0) - 2.6 |a_0|: best at a_0 = 0
        assert np.abs(res).mean() < 0.05


@pytest.mark.parametrize("key", ["human", "demo"])
def test_actor_imitates_human_or_demo_actions_only_on_those_transitions(key):
    weights = {"intervention_bc": float(key == "human"), "demo_bc": float(key == "demo")}
    log = "intervention_bc" if key == "human" else "demo_bc"
    agent = _agent(actor_lr=3e-3, scale=0.5, residual_l2=0.0, **weights)
    rng = np.random.default_rng(0)
    batch = _batch(rng, b=128)
    human = (np.arange(128) % 2).astype(np.float32)  # every other transition is the human's
    correction = np.array([0.3, -0.2], np.float32)
    batch["obs"][key] = human
    batch["action"] = np.clip(batch["obs"]["base_action"] + correction, -1, 1)
    batch["action"][human == 0] = rng.uniform(-1, 1, (64, 2))  # agent's own: no imitation
    obs = torch.from_numpy(batch["obs"]["features"])
    base = torch.from_numpy(batch["obs"]["base_action"])
    for _ in range(300):
        logs = agent.update(batch, update_actor=True)
    wanted = np.clip(batch["action"] - batch["obs"]["base_action"], -0.5, 0.5)
    res = agent.residual(obs, base).detach().numpy()
    err = np.abs(res - wanted)[human == 1].mean()
    assert err < 0.05, err
    assert logs[log] < 0.01
    # without the term the actor only follows the (untrained) critic
    plain = _agent(actor_lr=3e-3, scale=0.5, residual_l2=0.0, intervention_bc=0.0, demo_bc=0.0)
    for _ in range(300):
        logs = plain.update(batch, update_actor=True)
    assert log not in logs
    res = plain.residual(obs, base).detach().numpy()
    assert np.abs(res - wanted)[human == 1].mean() > 0.1


@pytest.mark.parametrize("variance", [0.0, 10.0])
def test_variance_keeps_the_constant_part_of_a_noisy_correction(variance):
    agent = _agent(actor_lr=3e-3, scale=0.5, residual_l2=0.0, demo_bc=1.0, variance=variance)
    agent.critic = _LinearHeads([0.0, 0.0, 0.0, 0.0])  # no gradient from the critic
    agent.critic_target = _LinearHeads([0.0, 0.0, 0.0, 0.0])
    rng = np.random.default_rng(0)
    batch = _batch(rng, b=128)
    batch["obs"]["demo"] = np.ones(128, np.float32)
    correction = np.array([0.2, -0.1], np.float32) + rng.normal(0, 0.1, (128, 2))  # + state noise
    batch["obs"]["base_action"] = np.clip(batch["obs"]["base_action"], -0.5, 0.5)
    batch["action"] = np.clip(batch["obs"]["base_action"] + correction, -1, 1).astype(np.float32)
    for _ in range(400):
        logs = agent.update(batch, update_actor=True)
    obs = torch.from_numpy(batch["obs"]["features"])
    res = agent.residual(obs, torch.from_numpy(batch["obs"]["base_action"])).detach().numpy()
    np.testing.assert_allclose(res.mean(0), [0.2, -0.1], atol=0.03)  # the mean either way
    if variance:
        assert res.std(0).max() < 0.02 and logs["residual_variance"] < 1e-3
    else:  # fits the state-dependent part of the target
        assert res.std(0).min() > 0.05 and "residual_variance" not in logs


def test_featurizer_standardises_in_order():
    stats = {
        "state/a": {"mean": np.array([1.0]), "std": np.array([2.0])},
        "state/b": {"mean": np.zeros(2), "std": np.ones(2)},
    }
    f = StateFeaturizer(["state/b", "state/a"], stats)
    out = f({"state/a": np.array([5.0]), "state/b": np.array([3.0, 4.0])})
    np.testing.assert_allclose(out, [3.0, 4.0, 2.0])
    assert f.dim == 3
    with pytest.raises(KeyError, match="state/c"):
        StateFeaturizer(["state/c"], stats)


def test_bad_config():
    with pytest.raises(ValueError, match="target_heads"):
        ResidualAgent(4, 2, ResidualConfig(ensemble=1, target_heads=2))


def test_dims_restrict_the_residual_and_its_exploration():
    agent = ResidualAgent(4, 3, ResidualConfig(hidden=32, ensemble=4, dims=[1]), seed=0)
    with torch.no_grad():
        agent.actor[-1].weight.normal_(0, 10.0)
        agent.actor[-1].bias.fill_(1.0)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, 4)).astype(np.float32)
    base = rng.uniform(-0.5, 0.5, (64, 3)).astype(np.float32)
    a, res = agent.act(obs, base, explore=True, rng=rng)
    np.testing.assert_array_equal(res[:, [0, 2]], 0.0)  # untouched dims: the base, no noise
    np.testing.assert_array_equal(a[:, [0, 2]], base[:, [0, 2]])
    assert np.abs(res[:, 1]).min() > 0 and not np.allclose(a[:, 1], base[:, 1])
    warm = warmup_actions(base, 0.05, rng, agent.mask.numpy())
    np.testing.assert_array_equal(warm[:, [0, 2]], base[:, [0, 2]])
    assert np.abs(warm[:, 1] - base[:, 1]).max() > 0


@pytest.mark.parametrize("dims", [[], [3], [0, 0], [-1]])
def test_bad_dims(dims):
    with pytest.raises(ValueError, match="dims"):
        ResidualAgent(4, 3, ResidualConfig(dims=dims))


def test_smoothness_keeps_the_residual_near_its_mean_across_states():
    rng = np.random.default_rng(0)
    batch = _batch(rng, b=128)
    batch["obs"]["demo"] = np.ones(128, np.float32)
    # demos ask for a correction of +0.2 in dim 0 plus state-dependent jitter of std 0.1
    jitter = rng.normal(0, 0.1, 128).astype(np.float32)
    batch["action"] = batch["obs"]["base_action"].copy()
    batch["action"][:, 0] += 0.2 + jitter
    batch["next_obs"]["features"] = batch["obs"]["features"] + 0.05 * rng.normal(
        size=(128, 4)
    ).astype(np.float32)
    batch["next_obs"]["base_action"] = batch["obs"]["base_action"]
    obs = torch.from_numpy(batch["obs"]["features"])
    base = torch.from_numpy(batch["obs"]["base_action"])
    spread = {}
    for weight in (0.0, 10.0):
        agent = _agent(
            actor_lr=3e-3,
            scale=0.5,
            residual_l2=0.0,
            demo_bc=1.0,
            smoothness=weight,
            smoothness_std=1.0,
        )
        for _ in range(400):
            logs = agent.update(batch, update_actor=True)
        res = agent.residual(obs, base).detach().numpy()[:, 0]
        assert abs(res.mean() - 0.2) < 0.05  # the mean correction is kept either way
        spread[weight] = res.std()
        assert ("smoothness" in logs) == (weight > 0)
    assert spread[10.0] < 0.5 * spread[0.0], spread

"""Residual RL: step 0 is the base, the TD3 learner's pieces, and it learns on a biased base."""

import numpy as np
import pytest
import torch
import yaml

from robotrl.algos.residual import (
    ResidualAgent,
    ResidualConfig,
    StateFeaturizer,
    load_agent,
    save_agent,
    stats_meta,
)
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


@pytest.mark.slow
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


def test_the_default_actor_fits_a_human_correction_within_hundreds_of_updates():
    """An operator's correction, within the residual's bound, is learnt at the default actor lr
    in a few hundred updates; at the earlier default 1e-5 (and weight 1) it is still far off."""

    def error_after(updates, **kw):
        agent = _agent(**kw)
        batch = _batch(np.random.default_rng(0), b=128)
        batch["obs"]["human"] = np.ones(128, np.float32)
        correction = np.array([0.08, -0.06], np.float32)
        batch["action"] = np.clip(batch["obs"]["base_action"] + correction, -1, 1)
        for _ in range(updates):
            agent.update(batch, update_actor=True)
        obs, base = (torch.from_numpy(batch["obs"][k]) for k in ("features", "base_action"))
        wanted = np.clip(batch["action"] - batch["obs"]["base_action"], -0.1, 0.1)
        return np.abs(agent.residual(obs, base).detach().numpy() - wanted).mean()

    assert error_after(600) < 0.015
    assert error_after(600, actor_lr=1e-5, intervention_bc=1.0) > 0.04


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


def test_load_agent_drops_options_an_older_checkpoint_saved(tmp_path):
    agent = _agent(scale=0.3)
    with torch.no_grad():
        agent.actor[-1].bias.fill_(0.5)
    directory = save_agent(agent, tmp_path / "ckpt", {"task": "reach"})
    path = directory / "config.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["config"].update({"cql": 0.0, "smoothness": 0.0, "pessimism": 0.0, "variance": 0.0})
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    loaded, meta = load_agent(directory)
    assert meta == {"task": "reach"} and loaded.cfg == agent.cfg
    obs = torch.zeros(3, 4)
    base = torch.zeros(3, 2)
    torch.testing.assert_close(loaded.residual(obs, base), agent.residual(obs, base))


def test_feature_stats_from_the_demos_or_the_base_normaliser(tmp_path):
    from robotrl.algos.residual import feature_stats

    class Base:  # the base's normaliser maps x to (x - offset) * scale
        class normalizer:
            @staticmethod
            def affine(key):
                return np.array([1.0, 2.0]), np.array([0.5, 4.0])

    stats = feature_stats(["state/x"], Base())
    np.testing.assert_allclose(stats["state/x"]["mean"], [1.0, 2.0])
    np.testing.assert_allclose(stats["state/x"]["std"], [2.0, 0.25])


def test_feature_statistics_survive_a_checkpoints_metadata():
    stats = {"state/pos": {"mean": np.zeros(2), "std": np.full(2, 0.5), "min": np.zeros(2)}}
    meta = stats_meta(stats)
    assert meta == {"state/pos": {"mean": [0.0, 0.0], "std": [0.5, 0.5]}}
    feat = StateFeaturizer(["state/pos"], meta)
    np.testing.assert_allclose(feat({"state/pos": np.ones((1, 2))}), [[2.0, 2.0]])

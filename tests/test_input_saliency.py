"""What a residual reads: a residual that moves with one input is credited to that input alone,
in residual units per spread of it; inputs without spread and a constant residual are credited
nothing; shares group a key's entries; input names follow the featurizer; a residual on its base
is recorded at every step of its episodes, and bad input is refused."""

import numpy as np
import pytest
import torch
from tiny_reach import reach_demos, tiny_checkpoint

import sim
from robotrl.algos.relative_features import RelativeFeaturizer
from robotrl.algos.residual import ResidualAgent, ResidualConfig, StateFeaturizer, save_agent
from robotrl.algos.residual_policy import load_residual_policy
from robotrl.benchmarks.input_saliency import (
    BASE_ACTION,
    input_names,
    input_sensitivity,
    input_shares,
    record_inputs,
    spread,
)

KEYS = ["state/ee_pos", "state/goal_pos"]


class _ReadsOne:
    """A residual agent whose correction is ``gain`` times input entry ``j`` (features, then
    the base's action) in every action dimension."""

    def __init__(self, obs_dim: int, act_dim: int, j: int, gain: float) -> None:
        self.obs_dim, self.act_dim, self.j, self.gain = obs_dim, act_dim, j, gain

    def act(self, obs, base, *, explore, rng=None):
        x = np.concatenate([obs, base], axis=-1)
        res = np.repeat(self.gain * x[:, self.j : self.j + 1], self.act_dim, axis=1)
        return np.clip(base + res, -1.0, 1.0), res


def _inputs(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 5)).astype(np.float32), rng.uniform(-0.5, 0.5, (n, 2)).astype(
        np.float32
    )


@pytest.mark.parametrize("j", [2, 6])  # a feature, the base's action
def test_a_residual_that_reads_one_input_is_credited_to_it_alone(j) -> None:
    obs, base = _inputs()
    s = input_sensitivity(_ReadsOne(5, 2, j, 0.5), obs, base)
    width = spread(np.concatenate([obs, base], axis=-1))
    assert s[j] == pytest.approx(0.5 * width[j], rel=1e-4)
    assert np.count_nonzero(s) == 1


def test_an_input_without_spread_and_a_constant_residual_are_credited_nothing() -> None:
    obs, base = _inputs()
    obs[:, 2] = 3.0  # constant over the recorded steps
    s = input_sensitivity(_ReadsOne(5, 2, 2, 0.5), obs, base)
    assert np.all(s == 0.0) and np.all(np.isfinite(s))
    shares = input_shares(s, ["a"] * 7)
    assert shares == {"a": 0.0}


def test_shares_group_a_keys_entries_largest_first() -> None:
    shares = input_shares(np.array([1.0, 1.0, 6.0, 0.0]), ["pos", "pos", "quat", BASE_ACTION])
    assert list(shares) == ["quat", "pos", BASE_ACTION]
    assert shares == pytest.approx({"quat": 0.75, "pos": 0.25, BASE_ACTION: 0.0})


def test_bad_input_is_refused() -> None:
    obs, base = _inputs()
    agent = _ReadsOne(5, 2, 0, 1.0)
    with pytest.raises(ValueError, match="same N"):
        input_sensitivity(agent, obs, base[:-1])
    with pytest.raises(ValueError, match="step"):
        input_sensitivity(agent, obs, base, step=0.0)
    with pytest.raises(ValueError, match="names"):
        input_shares(np.ones(3), ["a", "b"])


def test_input_names_follow_the_featurizer() -> None:
    stats = {k: {"mean": [0.0] * 3, "std": [1.0] * 3} for k in KEYS}
    stats["state/gripper"] = {"mean": [0.0], "std": [1.0]}
    state = StateFeaturizer([*KEYS, "state/gripper"], stats)
    assert input_names(state, 2) == [*["state/ee_pos"] * 3, *["state/goal_pos"] * 3,
                                     "state/gripper", BASE_ACTION, BASE_ACTION]  # fmt: skip
    relative = input_names(RelativeFeaturizer(state), 1)
    assert relative[7:] == [*["state/goal_pos - state/ee_pos"] * 3, BASE_ACTION]


@pytest.fixture(scope="module")
def residual(tmp_path_factory):
    """A constant residual (0.1 on every action entry) on a tiny reach base, loaded on it."""
    root = tmp_path_factory.mktemp("input_saliency")
    base = tiny_checkpoint(root, reach_demos(root))
    agent = ResidualAgent(6, 7, ResidualConfig(hidden=16, ensemble=2, scale=0.5), seed=0)
    with torch.no_grad():  # a_r = 0.5 tanh(b) with the last layer's weights at 0
        agent.actor[-1].weight.zero_()
        agent.actor[-1].bias.copy_(torch.atanh(torch.full((7,), 0.1 / 0.5)))
    meta = {
        "base_checkpoint": str(base),
        "task": "reach",
        "obs_keys": KEYS,
        "execute_horizon": 4,
        "featurizer": {k: {"mean": [0.0] * 3, "std": [1.0] * 3} for k in KEYS},
        "base_noise_scale": 0.0,
    }
    policy, _ = load_residual_policy(save_agent(agent, root / "residual", meta))
    return policy


def test_a_residual_on_its_base_is_recorded_at_every_step(residual) -> None:
    env = sim.make("reach")
    try:
        obs, base, result = record_inputs(residual, env, 2, seed=3)
        first, steps = env.reset(seed=3)[0], 0
        for seed in (3, 4):  # the same episodes again, counted
            o, _ = env.reset(seed=seed)
            residual.reset()
            done = False
            while not done:
                o, _, terminated, truncated, _ = env.step(residual(o))
                steps, done = steps + 1, terminated or truncated
        with pytest.raises(ValueError, match="episodes"):
            record_inputs(residual, env, 0)
    finally:
        env.close()
    assert obs.shape == (steps, 6) and base.shape == (steps, 7)
    assert np.allclose(obs[0], residual.featurizer(first))
    assert 0.0 <= result.success_rate <= 1.0
    # a constant residual moves with no input
    assert np.all(input_sensitivity(residual.agent, obs, base) == 0.0)

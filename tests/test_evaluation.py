import numpy as np
import pytest
import torch

from robotrl.evaluation import EvalResult, evaluate, evaluate_vector, wilson_interval


def test_wilson_interval_known_values():
    lo, hi = wilson_interval(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-3)
    assert hi == pytest.approx(0.5962, abs=1e-3)
    lo, hi = wilson_interval(0, 20)
    assert lo == 0.0 and 0.1 < hi < 0.2
    lo, hi = wilson_interval(20, 20)
    assert hi == 1.0 and 0.8 < lo < 0.9


class _CountdownEnv:
    """Succeeds on step ``k`` when the seed is even; truncates after 5 steps otherwise."""

    def reset(self, seed=None):
        self.seed, self.t = seed, 0
        return {"x": np.zeros(1)}, {}

    def step(self, action):
        self.t += 1
        success = self.seed % 2 == 0 and self.t == 3
        return {"x": np.zeros(1)}, float(success), success, self.t >= 5, {"success": success}


class _Policy:
    resets = 0

    def reset(self):
        self.resets += 1

    def __call__(self, obs):
        return np.zeros(7)


def test_evaluate_counts_seeds_lengths_and_resets():
    policy = _Policy()
    res = evaluate(_CountdownEnv(), policy, 10, seed=0, progress=False)
    assert isinstance(res, EvalResult)
    assert res.successes == [True, False] * 5
    assert res.lengths == [3, 5] * 5
    assert res.success_rate == 0.5
    assert res.mean_length == 4.0
    assert policy.resets == 10
    assert set(res.summary()) >= {"episodes", "success_rate", "success_ci95", "mean_length"}


class _SamplingPolicy(_Policy):
    """Draws its action from torch's global generator, as a flow base samples its noise."""

    def __init__(self):
        self.draws = []

    def __call__(self, obs):
        self.draws.append(float(torch.randn(())))
        return np.zeros(7)


def test_evaluate_draws_from_its_seed_and_leaves_the_callers_generator():
    torch.manual_seed(0)
    before = torch.random.get_rng_state()
    first, second, other = _SamplingPolicy(), _SamplingPolicy(), _SamplingPolicy()
    evaluate(_CountdownEnv(), first, 3, seed=10, progress=False)
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.randn(5)  # the caller's generator moved on: the evaluation's draws do not
    evaluate(_CountdownEnv(), second, 3, seed=10, progress=False)
    evaluate(_CountdownEnv(), other, 3, seed=11, progress=False)
    assert first.draws == second.draws and first.draws != other.draws


def test_evaluate_rejects_zero_episodes():
    with pytest.raises(ValueError, match="episodes"):
        evaluate(_CountdownEnv(), _Policy(), 0)


class _CountdownVector:
    """Two countdown envs with next-step autoreset (the step after an episode's end resets)."""

    num_envs = 2

    def reset(self, seed=None):
        self.envs = [_CountdownEnv() for _ in range(2)]
        self.seeds = [seed, seed + 1]
        self.pending = [False, False]
        for env, s in zip(self.envs, self.seeds, strict=True):
            env.reset(seed=s)
        return {"x": np.zeros((2, 1))}, {}

    def step(self, actions):
        out = []
        for i, env in enumerate(self.envs):
            if self.pending[i]:  # the autoreset step: reward 0, not done
                self.seeds[i] += 2
                env.reset(seed=self.seeds[i])
                self.pending[i] = False
                out.append((0.0, False, False, False))
                continue
            _, r, term, trunc, info = env.step(actions[i])
            self.pending[i] = term or trunc
            out.append((r, term, trunc, info["success"]))
        r, term, trunc, success = (np.array(c) for c in zip(*out, strict=True))
        return {"x": np.zeros((2, 1))}, r, term, trunc, {"success": success}


class _Runner:
    def reset(self, env_ids=None):
        pass

    def act(self, obs):
        return np.zeros((2, 7))


def test_evaluate_vector_reports_which_envs_executed_each_step():
    masks = []
    res = evaluate_vector(
        _CountdownVector(), _Runner(), 4, seed=0, progress=False, on_step=masks.append
    )
    assert res.successes == [True, False, True, False] and res.lengths == [3, 5, 3, 5]
    executed = np.array(masks)
    # env 0: 3 steps, a reset step, 3 steps (its quota of 2 is done at step 7)
    assert executed[:7, 0].tolist() == [True, True, True, False, True, True, True]
    assert executed[:5, 1].all()  # env 1's first episode: 5 executed steps
    assert not executed[5, 1]  # then its reset step

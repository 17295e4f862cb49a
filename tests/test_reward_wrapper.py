"""RewardClassifierWrapper: classifier reward, termination on predicted success, true success
kept in info."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from robotrl.algos.reward_classifier import RewardClassifier
from robotrl.algos.reward_wrapper import RewardClassifierWrapper

SIZE = 8


class RednessClassifier(RewardClassifier):
    """Logit = 20 * (mean red - 0.5): a known classifier, so the test checks the wrapper."""

    def forward(self, obs):
        self._check(obs)
        red = torch.as_tensor(obs["images/front"]).float()[..., 0].mean(dim=(1, 2)) / 255.0
        return 20.0 * (red - 0.5)


class ToyEnv(gym.Env):
    """The image turns red at step ``red_at``; the env's own success comes at ``success_at``."""

    def __init__(self, red_at=3, success_at=5, size=SIZE):
        self.observation_space = gym.spaces.Dict(
            {"images/front": gym.spaces.Box(0, 255, (size, size, 3), np.uint8)}
        )
        self.action_space = gym.spaces.Box(-1, 1, (1,))
        self.red_at, self.success_at, self.size = red_at, success_at, size

    def _obs(self):
        img = np.zeros((self.size, self.size, 3), np.uint8)
        img[..., 0] = 255 if self.t >= self.red_at else 0
        return {"images/front": img}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {"success": False}

    def step(self, action):
        self.t += 1
        success = self.t >= self.success_at
        return self._obs(), 7.0 * success, False, self.t >= 10, {"success": success}


def _classifier():
    return RednessClassifier(["images/front"], image_size=(SIZE, SIZE), threshold=0.8)


def _rollout(env):
    env.reset(seed=0)
    steps = []
    while True:
        _, r, term, trunc, info = env.step(np.zeros(1))
        steps.append((r, term, info))
        if term or trunc:
            return steps


def test_reward_comes_from_the_classifier_and_ends_the_episode():
    steps = _rollout(RewardClassifierWrapper(ToyEnv(red_at=3, success_at=5), _classifier()))
    assert [s[0] for s in steps] == [0.0, 0.0, 1.0]  # red (classifier fires) at step 3
    assert steps[-1][1] and not any(s[1] for s in steps[:-1])
    last = steps[-1][2]
    assert last["classifier_success"] and last["classifier_prob"] > 0.99
    assert last["success"] is False and last["env_reward"] == 0.0  # the sim's truth, untouched


def test_without_termination_reward_follows_classifier_and_info_keeps_true_success():
    env = RewardClassifierWrapper(ToyEnv(red_at=3, success_at=5), _classifier(), False)
    steps = _rollout(env)
    assert len(steps) == 10
    assert [s[0] for s in steps] == [0.0] * 2 + [1.0] * 8
    assert [s[2]["success"] for s in steps] == [False] * 4 + [True] * 6
    assert [s[2]["env_reward"] for s in steps] == [0.0] * 4 + [7.0] * 6


def test_wrapper_rejects_envs_the_classifier_cannot_read():
    with pytest.raises(ValueError, match="image_size"):
        RewardClassifierWrapper(ToyEnv(size=SIZE * 2), _classifier())
    other = RednessClassifier(["images/wrist"], image_size=(SIZE, SIZE))
    with pytest.raises(ValueError, match=r"does not observe \['images/wrist'\]"):
        RewardClassifierWrapper(ToyEnv(), other)


def test_wraps_the_sim_env_with_its_camera_observations():
    import sim

    env = sim.make("lift", cameras=("front",), image_size=(SIZE, SIZE), terminate_on_success=False)
    clf = RewardClassifier(["images/front"], image_size=(SIZE, SIZE), hidden=8, threshold=0.5)
    clf.head[-1].bias.data.fill_(-10.0)  # p ~ 0: never fires
    wrapped = RewardClassifierWrapper(env, clf)
    wrapped.reset(seed=0)
    _, r, term, _, info = wrapped.step(np.zeros(7, np.float32))
    assert r == 0.0 and not term and info["classifier_prob"] < 0.01
    assert info["success"] is False and "safety" in info  # the env's info passes through
    wrapped.close()

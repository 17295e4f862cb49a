"""Gymnasium wrapper that takes the reward from a success classifier, as on hardware.

The env's own reward is replaced by 1.0 when the classifier says the new observation shows
success, else 0.0; with ``terminate_on_success`` the episode also ends there (HIL-SERL ends
real-robot episodes on the classifier). ``info["success"]`` is left as the env reports it (the
simulator's truth in sim), and the wrapper adds:

- ``classifier_prob``: p(success) of the new observation;
- ``classifier_success``: p >= threshold (what the reward and termination use);
- ``env_reward``: the reward the env returned.

To mimic hardware in sim, build the env with ``terminate_on_success=False`` so that only the
classifier ends episodes: :func:`with_reward_classifier` builds such an env (``backend=ros2``
with ``ros2.reward_classifier``; the training envs of ``robotrl train-rl reward_classifier=``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from robotrl.algos.reward_classifier import RewardClassifier, load_reward_classifier


class RewardClassifierWrapper(gym.Wrapper):
    """Replace the reward of ``env`` with ``classifier``'s thresholded success.

    Args:
        env: Gymnasium env whose dict observations hold the classifier's keys
            (``images/<cam>`` at the classifier's image size, its ``state/*`` entries).
        classifier: a trained :class:`RewardClassifier` (frozen here).
        terminate_on_success: end the episode when the classifier fires.
    """

    def __init__(
        self, env: gym.Env, classifier: RewardClassifier, terminate_on_success: bool = True
    ) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Dict):
            raise ValueError(f"the env must have dict observations, got {space}")
        missing = [k for k in classifier.keys if k not in space.spaces]
        if missing:
            raise ValueError(
                f"the env does not observe {missing} (the classifier needs {classifier.keys}); "
                f"build it with the classifier's cameras, e.g. cameras=[...]"
            )
        for key in classifier.image_keys:
            want = (*classifier.image_size, 3)
            shape = space[key].shape
            if shape is None or tuple(shape) != want:
                raise ValueError(
                    f"{key}: the env renders {shape}, the classifier was "
                    f"trained on {want}; build the env with image_size={classifier.image_size}"
                )
        self.classifier = classifier.freeze()
        self.terminate_on_success = bool(terminate_on_success)

    def step(
        self, action: Any
    ) -> tuple[dict[str, np.ndarray], SupportsFloat, bool, bool, dict[str, Any]]:
        obs, env_reward, terminated, truncated, info = self.env.step(action)
        batch = {k: np.asarray(obs[k])[None] for k in self.classifier.keys}
        prob = float(self.classifier.predict_proba(batch)[0])
        fired = prob >= self.classifier.threshold
        info = {
            **info,
            "classifier_prob": prob,
            "classifier_success": fired,
            "env_reward": float(env_reward),
        }
        terminated = bool(terminated or (self.terminate_on_success and fired))
        return obs, float(fired), terminated, bool(truncated), info


class ClassifierSuccess(gym.Wrapper):
    """``info["success"]`` from a reward classifier wrapper (what a robot without a task oracle
    knows); the env's own verdict moves to ``info["oracle_success"]``. Exposes the sim's action
    scales of the wrapped env."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        inner: Any = env.unwrapped
        self.max_dpos, self.max_drot, self.control_hz = (
            inner.max_dpos,
            inner.max_drot,
            inner.control_hz,
        )

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = {
            **info,
            "oracle_success": bool(info.get("success", False)),
            "success": bool(info["classifier_success"]),
        }
        return obs, reward, terminated, truncated, info


def with_reward_classifier(
    env_factory: Any, directory: str, cameras: Sequence[str], image_size: tuple[int, int]
) -> gym.Env:
    """``env_factory(cameras, image_size)`` observing what the classifier at ``directory``
    reads, wrapped so that reward, termination and success follow the classifier."""

    clf, _meta = load_reward_classifier(directory)
    cams = [k.split("/", 1)[1] for k in clf.image_keys]
    if cameras and tuple(image_size) != tuple(clf.image_size):
        raise ValueError(
            f"the policy's cameras are {tuple(image_size)}, the reward classifier's "
            f"{tuple(clf.image_size)}: one image size per env"
        )
    env = env_factory(tuple(dict.fromkeys([*cameras, *cams])), tuple(clf.image_size))
    # the classifier ends episodes, not the oracle (there is none on a real arm)
    env.unwrapped.terminate_on_success = False
    return ClassifierSuccess(RewardClassifierWrapper(env, clf, terminate_on_success=True))

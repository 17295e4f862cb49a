"""Online risk learner: SARSA transitions from a guarded env, weights pushed to its reflex."""

import numpy as np

from robotrl.algos.online_risk import OnlineRiskLearner
from robotrl.algos.safety_critic import SafetyCritic


class _FakeCritic:
    def __init__(self) -> None:
        self.loaded = 0

    def load(self, weights) -> None:
        assert "q1.w0" in weights
        self.loaded += 1


class _FakeGuard:
    def __init__(self) -> None:
        self.on_transition = None
        self.reflex = type("R", (), {"critic": _FakeCritic()})()


def test_online_learner_stores_sarsa_transitions_and_pushes_weights() -> None:
    critic = SafetyCritic(2, 1, seed=0)
    learner = OnlineRiskLearner(critic, capacity=100, update_every=4, updates=3)
    guard = _FakeGuard()
    learner.attach(guard)
    s = [np.array([float(i), 0.0]) for i in range(6)]
    guard.on_transition(s[0], np.array([0.1]), 0, s[1], False, False)
    guard.on_transition(s[1], np.array([0.2]), 0, s[2], False, True)  # reflex mid-step: skip
    guard.on_transition(s[2], np.array([0.3]), 0, s[3], False, False)
    guard.on_transition(s[3], np.array([0.4]), 1, s[4], False, False)  # violation: terminal
    guard.on_transition(s[4], np.array([0.5]), 0, s[5], True, False)  # episode end
    buf = learner.buffer
    assert len(buf) == 4 and learner.skipped == 1  # s0, s2, s3, s4 in order of completion
    np.testing.assert_allclose(buf.obs["features"][:4, 0], [0, 2, 3, 4])
    # a' is the next reported action (SARSA), also across a skipped step
    np.testing.assert_allclose(buf.next_obs["act"][:2, 0], [0.2, 0.4])
    np.testing.assert_allclose(buf.reward[:4], [0.0, 0.0, 1.0, 0.0])
    np.testing.assert_array_equal(buf.terminated[:4], [False, False, True, True])
    assert critic.updates == 3 and guard.reflex.critic.loaded == 1  # after 4 received

"""Risk critic: learns the discounted violation probability of a known chain, exports, and is
updated online from a guarded env's transitions."""

import numpy as np

from robotrl.algos.safety_critic import (
    OnlineRiskLearner,
    SafetyCritic,
    SafetyCriticConfig,
    risk_buffer,
)

GAMMA = 0.8
STEP = 0.1


def _chain_buffer(n: int, rng: np.random.Generator):
    """x' = x + STEP a; violation when x' > 1; afterwards the behaviour always pushes (+1)."""
    buf = risk_buffer(n, 1, 1)
    for _ in range(n):
        x, a = rng.uniform(0.0, 1.05), rng.uniform(-1.0, 1.0)
        x1 = x + STEP * a
        c = float(x1 > 1.0)
        buf.add(
            {"features": [x], "act": [a]}, [a], c, {"features": [x1], "act": [1.0]}, c > 0, False
        )
    return buf


def _true_risk(x: float, a: float) -> float:
    x1 = x + STEP * a
    if x1 > 1.0:
        return 1.0
    m = int(np.floor((1.0 - x1) / STEP + 1e-9)) + 1  # +1 pushes until x crosses 1
    return GAMMA**m


def test_critic_learns_discounted_violation_probability_of_a_chain() -> None:
    rng = np.random.default_rng(0)
    buf = _chain_buffer(10_000, rng)
    critic = SafetyCritic(
        1, 1, SafetyCriticConfig(gamma_safe=GAMMA, lr=3e-3, batch_size=128), seed=0
    )
    critic.set_normalization(buf.obs["features"][: len(buf)])
    critic.fit(buf, 1500, rng, progress=False)
    xs = np.array([0.25, 0.55, 0.75, 0.85, 0.95])  # mid-way between the steps of the truth
    for a in (-1.0, 1.0):
        truth = np.array([_true_risk(x, a) for x in xs])
        pred = critic.risk(xs[:, None], np.full((len(xs), 1), a))
        np.testing.assert_allclose(pred, truth, atol=0.08)
    # monotone in the push: the same state is riskier when pushing toward the limit
    assert critic.risk([[0.85]], [[1.0]])[0] > critic.risk([[0.85]], [[-1.0]])[0] + 0.1


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


def test_pretrain_on_scripted_behaviour_exports_a_runtime_critic(tmp_path) -> None:
    from controllers.reflex import RiskMLP
    from robotrl.algos.safety_critic import pretrain_critic

    critic, buf, st = pretrain_critic(
        "peg_insert",
        tmp_path / "c.npz",
        episodes={"expert": 1, "adversarial": 2},
        updates=20,
        policies=("expert", "adversarial"),
        task_keys=("hole_pos",),
        progress=False,
    )
    # the expert is safe; ramming the block violates and ends each risk episode
    assert st["data"]["expert"]["violating_episodes"] == 0
    assert st["data"]["adversarial"]["violating_episodes"] == 2
    assert len(buf) == sum(d["transitions"] for d in st["data"].values())
    assert buf.reward[: len(buf)].sum() == 2 and critic.updates == 20
    mlp = RiskMLP.from_file(st["critic"])
    assert mlp.feature_names[-1] == "task/hole_pos" and mlp.obs_dim == 13


def test_pretrain_with_a_tighter_force_limit_labels_earlier_and_exports_eps_soft(tmp_path) -> None:
    from controllers.reflex import RiskMLP
    from robotrl.algos.safety_critic import SafetyCriticConfig, pretrain_critic

    stats = {}
    for limit in (1e6, 5.0):  # 1e6 N: never reached
        _, _, st = pretrain_critic(
            "peg_insert",
            tmp_path / f"c{limit}.npz",
            episodes=1,
            updates=5,
            policies=("adversarial",),
            cfg=SafetyCriticConfig(threshold=0.2, soft_threshold=0.05),
            force_limit=limit,
            progress=False,
        )
        stats[limit] = st
    # ramming the block: labelled as a violation at 5 N (ending the risk episode), never at 1e6 N
    never, tight = stats[1e6]["data"]["adversarial"], stats[5.0]["data"]["adversarial"]
    assert never["violating_episodes"] == 0 and tight["violating_episodes"] == 1
    assert tight["transitions"] < never["transitions"]
    mlp = RiskMLP.from_file(stats[5.0]["critic"])
    assert mlp.threshold == 0.2 and mlp.soft_threshold == 0.05

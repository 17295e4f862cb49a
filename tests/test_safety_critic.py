"""Risk critic: learns the discounted violation probability of a known chain and exports."""

import numpy as np
import pytest

from robotrl.algos.safety_critic import SafetyCritic, SafetyCriticConfig, risk_buffer

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


@pytest.mark.slow
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

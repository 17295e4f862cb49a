import numpy as np
import pytest
import torch

from policies.normalizer import Normalizer


def test_meanstd_and_minmax_round_trip():
    stats = {
        "state/x": {"mean": np.array([1.0, -2.0]), "std": np.array([2.0, 0.5])},
        "action": {"min": np.array([-0.5]), "max": np.array([1.5])},
    }
    n = Normalizer(stats, modes={"action": "minmax"})
    x = torch.tensor([[3.0, -1.0]])
    assert torch.allclose(n.normalize("state/x", x), torch.tensor([[1.0, 2.0]]))
    a = torch.tensor([[-0.5], [1.5], [0.5]])
    assert torch.allclose(n.normalize("action", a), torch.tensor([[-1.0], [1.0], [0.0]]))
    assert torch.allclose(n.unnormalize("action", n.normalize("action", a)), a)
    off, scale = n.affine("state/x")
    np.testing.assert_allclose(off, [1.0, -2.0])
    np.testing.assert_allclose(scale, [0.5, 2.0])


def test_constant_features_are_not_blown_up():
    n = Normalizer({"s": {"mean": np.zeros(1), "std": np.zeros(1)}})
    assert n.normalize("s", torch.ones(1, 1)).item() == pytest.approx(1e3)


def test_for_policy_and_placeholder():
    p = Normalizer.for_policy({"state/x": 3}, 2)
    x = torch.randn(4, 3)
    assert torch.equal(p.normalize("state/x", x), x)  # identity until weights are loaded
    with pytest.raises(KeyError, match="action"):
        Normalizer.for_policy({"state/x": 1}, 1, {"state/x": {"mean": [0.0], "std": [1.0]}})


def test_bad_statistics_and_keys():
    with pytest.raises(ValueError, match="non-finite"):
        Normalizer({"s": {"mean": np.array([np.nan]), "std": np.ones(1)}})
    with pytest.raises(ValueError, match="mode"):
        Normalizer({"s": {"mean": np.zeros(1), "std": np.ones(1)}}, default_mode="zscore")
    with pytest.raises(KeyError, match="no normalisation statistics"):
        Normalizer({"s": {"mean": np.zeros(1), "std": np.ones(1)}}).normalize("t", torch.zeros(1))

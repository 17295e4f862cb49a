"""The expert's rotation in place of a policy's: replaced exactly without a bound, moved by at
most the bound with one, the other entries untouched, and a bound that is not positive
refused."""

import numpy as np
import pytest

from robotrl.benchmarks.expert_rotation import RotationFix

POLICY = np.array([0.1, -0.2, 0.3, 0.5, -0.5, 0.0, 1.0])
EXPERT = np.array([0.0, 0.0, 0.0, 0.2, 0.1, 0.04, -1.0])


def test_without_a_bound_the_rotation_is_the_experts_and_the_rest_the_policys() -> None:
    out = RotationFix().turned(POLICY, EXPERT)
    assert np.array_equal(out[3:6], EXPERT[3:6])
    assert np.array_equal(out[[0, 1, 2, 6]], POLICY[[0, 1, 2, 6]])


def test_a_bound_limits_each_rotation_entrys_change() -> None:
    out = RotationFix(0.1).turned(POLICY, EXPERT)
    assert np.allclose(out[3:6], [0.4, -0.4, 0.04])
    assert np.array_equal(out[[0, 1, 2, 6]], POLICY[[0, 1, 2, 6]])


@pytest.mark.parametrize("bound", [0.0, -0.1, float("nan")])
def test_a_rotation_bound_must_be_positive(bound) -> None:
    with pytest.raises(ValueError, match="rotation_bound must be > 0"):
        RotationFix(bound)

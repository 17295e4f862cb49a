"""The scripted expert's rotation in place of a policy's: what an exactly oriented gripper (or a
residual that orients it within a bound) would add to a policy, used by the failure benchmarks.

Actions are the env's normalised action units; entries 3-5 are the rotation (a rotation vector
per step, base frame).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ROTATION = slice(3, 6)  # the rotation entries of an action


@dataclass(frozen=True)
class RotationFix:
    """Moves a policy's rotation towards the expert's.

    Attributes:
        bound: the largest change of each rotation entry [action units]; ``inf``: the expert's
            rotation replaces the policy's.

    Raises:
        ValueError: ``bound`` not > 0 (NaN included).
    """

    bound: float = float("inf")

    def __post_init__(self) -> None:
        if not self.bound > 0:  # NaN too
            raise ValueError(f"rotation_bound must be > 0, got {self.bound}")

    def turned(self, action: np.ndarray, expert_action: np.ndarray) -> np.ndarray:
        """(A,) float64 ``action`` with its rotation moved towards ``expert_action``'s by at most
        ``bound`` per entry (both (A,), the same action space)."""
        out = np.array(action, dtype=np.float64)
        wanted = np.asarray(expert_action, dtype=np.float64)[ROTATION]
        if np.isinf(self.bound):
            out[ROTATION] = wanted  # exactly the expert's, not a - a + e
        else:
            out[ROTATION] += np.clip(wanted - out[ROTATION], -self.bound, self.bound)
        return out

"""Constraint costs: which safety constraints a robot state violates, as a 0/1 cost.

Three constraints, each checked on measured signals (sim or hardware alike):

- ``force``: a contact force magnitude [N] above ``force_limit`` (the caller chooses the
  measurement: in sim the contact force on the fixed surroundings, on hardware ``|F_ext|`` of
  the wrist F/T sensor);
- ``workspace``: the TCP position [m, base frame] outside the box grown by ``workspace_margin``;
- ``joint_limit``: any joint closer than ``joint_margin`` [rad] to its limit.

The cost is ``c = 1`` if any is violated, else 0: the signal the risk critic
(:mod:`robotrl.algos.safety_critic`) learns to predict. :meth:`ConstraintCost.check` allocates
nothing and runs every control tick; which constraints fired is kept in ``last`` (a reused
dict of bools) and accumulated in ``counts``.
"""

from __future__ import annotations

import numpy as np

from controllers import panda

FORCE_LIMIT = 30.0  # [N] external force at the wrist (a peg jammed against the block reads ~70)
WORKSPACE_MARGIN = 0.02  # [m] the TCP may overshoot the filter's target box by this much
JOINT_MARGIN = 0.02  # [rad] inside the joint limits (the safety filter acts from 0.1 rad)
CONSTRAINTS = ("force", "workspace", "joint_limit")


class ConstraintCost:
    """0/1 constraint cost of a measured state (see module docstring).

    Args:
        workspace_low, workspace_high: (3,) TCP box [m], base frame.
        force_limit: bound of |F_ext| [N].
        workspace_margin: tolerance around the box [m].
        joint_margin: tolerance inside the joint limits [rad].
        q_min, q_max: (n,) joint limits [rad]; default the Panda's.
    """

    def __init__(
        self,
        workspace_low: np.ndarray,
        workspace_high: np.ndarray,
        force_limit: float = FORCE_LIMIT,
        workspace_margin: float = WORKSPACE_MARGIN,
        joint_margin: float = JOINT_MARGIN,
        q_min: np.ndarray | None = None,
        q_max: np.ndarray | None = None,
    ) -> None:
        lo = np.array(workspace_low, dtype=float)
        hi = np.array(workspace_high, dtype=float)
        if lo.shape != (3,) or hi.shape != (3,) or not np.all(lo <= hi):
            raise ValueError(
                f"expected workspace_low <= workspace_high, shapes (3,), got {lo!r}, {hi!r}"
            )
        if not (force_limit > 0 and workspace_margin >= 0 and joint_margin >= 0):
            raise ValueError(
                "expected force_limit > 0, margins >= 0, got "
                f"{force_limit}, {workspace_margin}, {joint_margin}"
            )
        self.force_limit = float(force_limit)
        self._lo = (lo - workspace_margin).tolist()
        self._hi = (hi + workspace_margin).tolist()
        qmin = np.array(panda.Q_MIN if q_min is None else q_min, dtype=float)
        qmax = np.array(panda.Q_MAX if q_max is None else q_max, dtype=float)
        if qmin.shape != qmax.shape or not np.all(qmin < qmax):
            raise ValueError(f"expected q_min < q_max of one shape, got {qmin!r}, {qmax!r}")
        self._qlo = qmin + joint_margin
        self._qhi = qmax - joint_margin
        self._mask = np.zeros(qmin.shape, dtype=bool)
        self.last: dict[str, bool] = dict.fromkeys(CONSTRAINTS, False)
        self.counts: dict[str, int] = dict.fromkeys(CONSTRAINTS, 0)

    def check(self, ee_pos: np.ndarray, force: float, q: np.ndarray) -> int:
        """Cost c in {0, 1} of TCP position (3,) [m, base frame], contact force magnitude [N]
        and joint positions (n,) [rad]. Non-finite measurements count as violations (fail
        closed)."""
        f = float(force)
        last = self.last
        last["force"] = not f <= self.force_limit  # NaN -> violated
        x, y, z = float(ee_pos[0]), float(ee_pos[1]), float(ee_pos[2])
        lo, hi = self._lo, self._hi
        last["workspace"] = not (
            lo[0] <= x <= hi[0] and lo[1] <= y <= hi[1] and lo[2] <= z <= hi[2]
        )
        m = self._mask
        np.less_equal(self._qlo, q, out=m)
        inside = bool(m.all())
        np.less_equal(q, self._qhi, out=m)
        last["joint_limit"] = not (inside and bool(m.all()))
        cost = 0
        for k, v in last.items():
            if v:
                self.counts[k] += 1
                cost = 1
        return cost

    def reset_counts(self) -> None:
        """Zero the cumulative ``counts``."""
        for k in CONSTRAINTS:
            self.counts[k] = 0

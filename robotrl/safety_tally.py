"""Constraint violations of a run's training steps, counted from the envs' ``info["safety"]``.

With ``safety=monitor`` (or ``reflex``) every env step reports its constraint cost (1 if any
physics tick of the step violated a constraint) and which constraints fired
(:class:`sim.safety_guard.SafetyGuard`). A :class:`SafetyTally` adds them up over the steps a
training loop takes, so that every learner (residual, DSRL, the policy-gradient methods) reports
the same counts of its own exploration, apart from the evaluations' episodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from controllers.constraint_cost import CONSTRAINTS

FIELDS = tuple(f"violation_{k}" for k in CONSTRAINTS)  # 0/1 per step in info["safety"]


class SafetyTally:
    """Sums of the steps' constraint costs.

    ``counts``: ``steps`` (env steps that reported a cost), ``violation_steps`` (steps whose
    cost is 1) and ``violation_<constraint>`` for each of
    :data:`controllers.constraint_cost.CONSTRAINTS` (steps in which that one fired).
    Steps without a cost (``safety=off``: the filter's flags only) are not counted.
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {"steps": 0, "violation_steps": 0, **dict.fromkeys(FIELDS, 0)}

    def add(self, info: Mapping[str, Any]) -> None:
        """Count one step's ``info`` of one env (scalars) or of a vector env (arrays, one entry
        per env, as gymnasium's vector envs gather them)."""
        safety = info.get("safety")
        if not isinstance(safety, Mapping) or "cost" not in safety:
            return
        cost = np.asarray(safety["cost"])
        self.counts["steps"] += int(cost.size)
        self.counts["violation_steps"] += int(np.count_nonzero(cost))
        for f in FIELDS:
            if f in safety:
                self.counts[f] += int(np.count_nonzero(np.asarray(safety[f])))

    def per_1000_steps(self) -> float:
        """Violation steps per 1 000 counted steps (0 when none was counted)."""
        steps = self.counts["steps"]
        return 1000.0 * self.counts["violation_steps"] / steps if steps else 0.0

    def summary(self, safety: str) -> dict[str, Any]:
        """A run's JSON entries under ``safety=<safety>``: none when off, else the mode and
        ``train_safety`` (``counts`` and ``per_1000_steps``)."""
        if safety == "off":
            return {}
        report = {**self.counts, "per_1000_steps": round(self.per_1000_steps(), 3)}
        return {"safety": safety, "train_safety": report}

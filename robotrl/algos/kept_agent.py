"""The weights a training run returns: those of its best evaluation (``keep_best``), or its last.

Every RL learner (the residual, DSRL, the flow policy gradients) evaluates its agent every
``eval_every`` env steps, first before any update (the base's own success). With
``keep_best`` the run returns the weights of its best evaluation, the latest among equals, and
the untrained weights (the base's behaviour) unless an evaluation beats the first one: a tie
is no evidence that the training helped.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def best_evaluation(rates: Sequence[float]) -> int:
    """Index of the evaluation whose weights ``keep_best`` keeps, given the success rates of a
    run's evaluations in order (the first: before any update): the latest of the best, or 0
    when none beats the first."""
    if not rates:
        raise ValueError("no evaluation to choose from")
    best = max(rates)
    if best <= rates[0]:
        return 0
    return max(i for i, r in enumerate(rates) if r == best)


class KeptAgent:
    """Snapshots of ``module``'s weights at its best evaluation so far.

    Args:
        module: the trained module; its ``state_dict`` is what is kept and restored.
        keep_best: False: :meth:`restore` leaves the last weights in place.

    Call :meth:`evaluated` after every evaluation, in order, and :meth:`restore` once the
    training has ended.
    """

    def __init__(self, module: nn.Module, keep_best: bool = True) -> None:
        self.module, self.keep_best = module, bool(keep_best)
        self.rates: list[float] = []
        self.weights: dict[str, torch.Tensor] = {}
        self.env_steps = 0  # the env step of the kept weights' evaluation

    def evaluated(self, success_rate: float, env_steps: int) -> bool:
        """Record an evaluation of the current weights; True when they become the kept ones."""
        self.rates.append(float(success_rate))
        if not (self.keep_best and best_evaluation(self.rates) == len(self.rates) - 1):
            return False
        self.weights = {k: v.detach().clone() for k, v in self.module.state_dict().items()}
        self.env_steps = int(env_steps)
        return True

    def restore(self, env_steps: int) -> int:
        """Load the kept weights into the module (``keep_best`` and at least one evaluation);
        return the env step they are from (``env_steps``, the last, otherwise)."""
        if self.keep_best and self.weights:
            self.module.load_state_dict(self.weights)
            return self.env_steps
        return int(env_steps)

"""What a ``robotrl train-rl`` learner that trains an agent beside the frozen base returns.

The residual (off-policy and PPO) and DSRL loops each return an :class:`AgentRun` of their own
agent type: the trained agent (the kept weights, :mod:`robotrl.algos.kept_agent`), the
evaluations and training episodes in order, the budget spent and the training steps' safety
violations. :func:`robotrl.metrics.learner_summary` reads it for the command's JSON.

Every learner's loop (these and the flow policy gradients) records its evaluations with
:func:`record_evaluation` and ends with :func:`finish_run`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from robotrl.algos.kept_agent import KeptAgent
from robotrl.metrics import LearnerRun, MetricsLogger
from robotrl.safety_tally import SafetyTally

AgentT = TypeVar("AgentT")


@dataclass
class AgentRun(Generic[AgentT]):
    """One training run of ``agent``.

    Attributes:
        agent: the trained agent, with the weights the run kept.
        evaluations: rows with ``env_steps`` and ``success_rate``, in order; the first before any
            update (the base's own success).
        episodes: the training episodes' rows (``env_steps``, ``success``, ``length``, ...).
        env_steps: env steps taken (summed over envs). wall_s: the run's wall time [s].
        steps_to_target: env steps at the first evaluation that reached ``target_success``.
        kept_step: env steps at the evaluation whose agent was kept.
        safety: the training steps' constraint violations.
        interrupted: the stop event ended the run before its budget.
    """

    agent: AgentT
    evaluations: list[dict[str, float]] = field(default_factory=list)
    episodes: list[dict[str, float]] = field(default_factory=list)
    env_steps: int = 0
    wall_s: float = 0.0
    steps_to_target: int | None = None
    kept_step: int = 0
    safety: SafetyTally = field(default_factory=SafetyTally)
    interrupted: bool = False


def record_evaluation(
    run: LearnerRun,
    row: dict[str, float],
    kept: KeptAgent,
    logger: MetricsLogger | None = None,
    target_success: float | None = None,
) -> bool:
    """Append an evaluation ``row`` (``env_steps``, ``success_rate``, ...) to ``run``, log it,
    tell ``kept`` of it, and set ``run.steps_to_target`` at the first row that reaches
    ``target_success``; return True for that row."""
    run.evaluations.append(row)
    if logger is not None:
        logger.log(**row)
    kept.evaluated(row["success_rate"], int(row["env_steps"]))
    reached = (
        run.steps_to_target is None
        and target_success is not None
        and row["success_rate"] >= target_success
    )
    if reached:
        run.steps_to_target = int(row["env_steps"])
    return reached


def finish_run(run: LearnerRun, kept: KeptAgent, env_steps: int, start: float) -> None:
    """End ``run`` after ``env_steps``: restore the kept weights, record their env step, the
    budget spent and the wall time since ``start`` (a ``time.perf_counter()`` reading)."""
    run.kept_step = kept.restore(env_steps)
    run.env_steps = int(env_steps)
    run.wall_s = time.perf_counter() - start

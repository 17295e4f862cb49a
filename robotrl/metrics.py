"""Training metrics: appended to ``metrics.csv`` as they come, plotted to PNG at the end.

Rows may carry different columns (evaluation rows appear less often than loss rows); the CSV
header is the union, rewritten when a new column appears.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class MetricsLogger:
    """Collects rows of scalars; ``path`` is the CSV written after every :meth:`log`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.rows: list[dict[str, float]] = []
        self.columns: list[str] = []

    def log(self, **values: float) -> None:
        row = {k: float(v) for k, v in values.items()}
        new = [k for k in row if k not in self.columns]
        self.rows.append(row)
        if new or not self.path.exists():
            self.columns += new
            self._rewrite()
        else:
            with self.path.open("a", newline="") as f:
                csv.DictWriter(f, self.columns).writerow(row)

    def _rewrite(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("w", newline="") as f:
            w = csv.DictWriter(f, self.columns)
            w.writeheader()
            w.writerows(self.rows)

    def series(self, x: str, y: str) -> tuple[list[float], list[float]]:
        pts = [(r[x], r[y]) for r in self.rows if x in r and y in r and math.isfinite(r[y])]
        return [p[0] for p in pts], [p[1] for p in pts]

    def has_data(self, x: str, cols: Sequence[str]) -> bool:
        """Whether any of ``cols`` has at least one finite value at a logged ``x``."""
        return any(self.series(x, col)[0] for col in cols)

    def figure(
        self,
        x: str,
        panels: Sequence[Sequence[str]],
        titles: Sequence[str] | None = None,
        log_y: Mapping[int, bool] | None = None,
    ) -> Figure:
        """A matplotlib figure with one subplot per panel (a list of y columns against ``x``).

        Panels whose columns hold no data are left out; with none left the figure is a single
        "no data yet" panel. Panels of success columns (see :func:`is_success_column`) span
        the fixed range [0, 1].
        """
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        kept = kept_panels(self, x, panels)
        if not kept:
            fig, ax = plt.subplots(figsize=(5, 3.6))
            ax.text(0.5, 0.5, "no data yet", ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
            return fig
        fig, axes = plt.subplots(1, len(kept), figsize=(5 * len(kept), 3.6), squeeze=False)
        for ax, j in zip(axes[0], kept, strict=True):
            cols = panels[j]
            for col in cols:
                xs, ys = self.series(x, col)
                if xs:
                    ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, label=col)
            ax.set_xlabel(x)
            if titles:
                ax.set_title(titles[j])
            if log_y and log_y.get(j):
                ax.set_yscale("log")
            elif all(is_success_column(c) for c in cols):
                # a fixed scale: one failed episode in twenty must not look like a collapse
                ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend()
        fig.tight_layout()
        return fig

    def plot(
        self,
        path: str | Path,
        x: str,
        panels: Sequence[Sequence[str]],
        titles: Sequence[str] | None = None,
        log_y: Mapping[int, bool] | None = None,
    ) -> Path:
        """:meth:`figure` saved as a PNG at ``path``; returns ``path``."""
        import matplotlib.pyplot as plt

        fig = self.figure(x, panels, titles, log_y)
        out = Path(path)
        fig.savefig(out, dpi=110)
        plt.close(fig)
        return out


def is_success_column(name: str) -> bool:
    """Whether a column is a success rate in [0, 1] (its name contains "success")."""
    return "success" in name


def kept_panels(logger: MetricsLogger, x: str, panels: Sequence[Sequence[str]]) -> list[int]:
    """Indices of the ``panels`` that have data to draw against ``x``."""
    return [j for j, cols in enumerate(panels) if logger.has_data(x, cols)]


def final_evaluation(
    evaluations: Sequence[Mapping[str, float]], step_key: str
) -> dict[str, float | int | bool | None]:
    """Summary keys of the last evaluation that ran: ``final_success`` (its success rate),
    ``final_eval_step`` (its ``step_key`` value) and ``final_is_base`` (True when it is the
    evaluation at step 0, before any training, so it says nothing about the trained policy).
    All None when no evaluation measured a success rate."""
    done = [e for e in evaluations if "success_rate" in e]
    if not done:
        return {"final_success": None, "final_eval_step": None, "final_is_base": None}
    last = done[-1]
    step = int(last[step_key])
    return {
        "final_success": float(last["success_rate"]),
        "final_eval_step": step,
        "final_is_base": step == 0,
    }


def worse_than_base(
    evaluations: Sequence[Mapping[str, float]], who: str = "robotrl train-rl"
) -> bool:
    """True when the last evaluation after training succeeded less often than the first one
    (the base, before any update); then one line on stderr says so, since an RL run that made
    the policy worse should not be deployed without a closer evaluation."""
    import sys

    done = [e for e in evaluations if "success_rate" in e]
    if len(done) < 2 or done[-1]["success_rate"] >= done[0]["success_rate"]:
        return False
    print(
        f"{who}: the trained policy succeeded less often than the base in the last evaluation "
        f"({done[-1]['success_rate']:.2f} vs {done[0]['success_rate']:.2f}); compare both with "
        "robotrl eval episodes=100 before deploying it",
        file=sys.stderr,
    )
    return True


class LearnerRun(Protocol):
    """What every ``robotrl train-rl`` learner's result holds (residual, DSRL, flow PG, PPO)."""

    evaluations: list[dict[str, float]]  # in order; the first before any update (the base)
    env_steps: int
    wall_s: float
    steps_to_target: int | None
    kept_step: int  # env steps at the evaluation whose agent was kept


def learner_summary(run: LearnerRun) -> dict[str, Any]:
    """The JSON keys every ``robotrl train-rl`` learner reports of its run: the base's success
    (the first evaluation), the last evaluation (:func:`final_evaluation`), whether it is worse
    than the base (:func:`worse_than_base`, which says so on stderr), the best evaluation, the
    kept agent's env step, the budget spent, the env steps to ``target_success`` and the wall
    time."""
    evals = run.evaluations
    return {
        "base_success": evals[0]["success_rate"],
        **final_evaluation(evals, "env_steps"),
        "worse_than_base": worse_than_base(evals),
        "best_success": max(e["success_rate"] for e in evals),
        "kept_step": run.kept_step,
        "env_steps": run.env_steps,
        "steps_to_target": run.steps_to_target,
        "wall_s": round(run.wall_s, 1),
    }


def episodes_summary(
    episodes: Sequence[Mapping[str, float]], run_dir: str | Path
) -> dict[str, Any]:
    """Write the training episodes' log (:func:`log_episodes`) and return the JSON keys that
    report them: their count, the success rate of the last 20 and the log's plot (None without
    episodes)."""
    plot = log_episodes(episodes, run_dir)
    last = [float(e["success"]) for e in episodes[-20:]]
    return {
        "episodes": len(episodes),
        "train_success_last_20": sum(last) / len(last) if last else 0.0,
        "episodes_plot": str(plot) if plot else None,
    }


def read_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a metrics CSV (empty cells dropped, numbers as float)."""
    with Path(path).open() as f:
        return [{k: float(v) for k, v in row.items() if v != ""} for row in csv.DictReader(f)]


def log_episodes(
    episodes: Sequence[Mapping[str, float]], run_dir: str | Path, window: int = 10
) -> Path | None:
    """Per-episode training log: ``episodes.csv`` plus ``episodes.png`` (success and
    intervention rate, each a running mean over ``window`` episodes, against env steps).

    ``episodes`` rows carry ``env_steps``, ``success``, ``length``, ``intervention_rate``.
    Returns the PNG path (None when there are no episodes).
    """
    if not episodes:
        return None
    run_dir = Path(run_dir)
    log = MetricsLogger(run_dir / "episodes.csv")
    succ: list[float] = []
    inter: list[float] = []
    for i, ep in enumerate(episodes):
        succ.append(float(ep["success"]))
        inter.append(float(ep.get("intervention_rate", 0.0)))
        lo = max(0, i + 1 - window)
        log.log(
            episode=i,
            **{k: float(v) for k, v in ep.items()},
            success_avg=sum(succ[lo:]) / len(succ[lo:]),
            intervention_rate_avg=sum(inter[lo:]) / len(inter[lo:]),
        )
    return log.plot(
        run_dir / "episodes.png",
        "env_steps",
        [["success_avg"], ["intervention_rate_avg"]],
        titles=[
            f"training-episode success (mean of {window})",
            f"intervention rate (mean of {window} episodes)",
        ],
    )

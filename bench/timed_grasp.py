"""The residual learner on a minutes-long stand-in for lift base a. Prints JSON lines.

Usage:
    python bench/timed_grasp.py [preset=lift|short] [demos=0] [seeds=0,1,2]
        [total_steps=20000] [eval_every=2000] [residual.<field>=<value> ...]

For each seed: the base's and the final residual's success over 100 fresh episodes (seeds from
200 000) and the 50-episode evaluations during training, as one JSON line; then one summary
line with the means. ``demos``: expert episodes in the demo buffer (0: reward only).
``residual.*`` sets :class:`robotrl.algos.residual.ResidualConfig` fields
(the defaults otherwise); the schedule is ``robotrl train-rl``'s (:class:`TrainConfig`). The
task and the base are :mod:`robotrl.benchmarks.timed_grasp`. One torch thread: run two
presets side by side on two cores.
"""

from __future__ import annotations

import ast
import json
import sys
from dataclasses import fields
from typing import Any

import numpy as np
import torch

from robotrl.algos.residual import ResidualConfig
from robotrl.algos.residual_training import TrainConfig
from robotrl.benchmarks.arguments import key_values
from robotrl.benchmarks.timed_grasp import PRESETS, train_and_evaluate

USAGE = __doc__.split("\n\n")[1]


def residual_overrides(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    """``residual.<field>=<value>`` arguments as ResidualConfig keyword arguments, and the rest."""
    known = {f.name for f in fields(ResidualConfig)}
    out, rest = {}, []
    for a in argv:
        key, _, value = a.partition("=")
        if not key.startswith("residual."):
            rest.append(a)
            continue
        name = key.removeprefix("residual.")
        if name not in known:
            raise SystemExit(
                f"unknown ResidualConfig field {name!r}; expected one of {sorted(known)}"
            )
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[name] = value
    return out, rest


def main(argv: list[str]) -> dict[str, Any]:
    over, rest = residual_overrides(argv)
    args = key_values(
        rest,
        {
            "preset": "lift",
            "demos": "0",
            "seeds": "0,1,2",
            "total_steps": "20000",
            "eval_every": "2000",
        },
        USAGE,
    )
    if args["preset"] not in PRESETS:
        raise SystemExit(f"preset must be one of {sorted(PRESETS)}, got {args['preset']!r}")
    torch.set_num_threads(1)
    timing, demos = PRESETS[args["preset"]], int(args["demos"])
    runs = []
    for seed in [int(s) for s in args["seeds"].split(",")]:
        train = TrainConfig(
            total_steps=int(args["total_steps"]),
            eval_every=int(args["eval_every"]),
            eval_episodes=50,
            seed=seed,
        )
        row: dict[str, Any] = {"preset": args["preset"], "demos": demos, "seed": seed}
        row["residual"] = over
        row.update(train_and_evaluate(timing, ResidualConfig(**over), train, demos=demos))
        print(json.dumps(row), flush=True)
        runs.append(row)
    summary = {
        "preset": args["preset"],
        "demos": demos,
        "residual": over,
        "base_success": float(np.mean([r["base_success"] for r in runs])),
        "success": float(np.mean([r["success"] for r in runs])),
        "per_seed": [r["success"] for r in runs],
    }
    print(json.dumps(summary), flush=True)
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])

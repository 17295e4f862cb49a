"""The residual learner on a minutes-long stand-in for lift base a. Prints JSON lines.

Usage:
    python bench/timed_grasp.py [preset=lift|short] [demos=0] [seeds=0,1,2]
        [total_steps=20000] [eval_every=2000] [residual.<field>=<value> ...]
    python bench/timed_grasp.py algo=residual_ppo [preset=...] [seeds=...]
        [residual_ppo.<field>=<value> ...]

For each seed: the base's and the final residual's success over 100 fresh episodes (seeds from
200 000) and the 50-episode evaluations during training, as one JSON line; then one summary
line with the means. ``demos``: expert episodes in the demo buffer (0: reward only).
``residual.*`` sets :class:`robotrl.algos.residual.ResidualConfig` fields
(the defaults otherwise); the schedule is ``robotrl train-rl``'s (:class:`TrainConfig`).
``algo=residual_ppo`` trains the on-policy residual instead, with ``robotrl train-rl
algo=residual_ppo``'s defaults (:class:`ResidualPPOConfig`: its own budget and schedule) and
``residual_ppo.*`` overrides; ``total_steps`` and ``eval_every`` then do not apply. The
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
from robotrl.algos.residual_ppo import ResidualPPOConfig
from robotrl.algos.residual_ppo_training import PPORunConfig
from robotrl.algos.residual_training import TrainConfig
from robotrl.benchmarks.arguments import key_values
from robotrl.benchmarks.timed_grasp import PRESETS, train_and_evaluate

USAGE = __doc__.split("\n\n")[1]


def residual_overrides(
    argv: list[str], section: str = "residual", cls: type = ResidualConfig
) -> tuple[dict[str, Any], list[str]]:
    """``<section>.<field>=<value>`` arguments as ``cls`` keyword arguments, and the rest."""
    known = {f.name for f in fields(cls)}
    out, rest = {}, []
    for a in argv:
        key, _, value = a.partition("=")
        if not key.startswith(f"{section}."):
            rest.append(a)
            continue
        name = key.removeprefix(f"{section}.")
        if name not in known:
            raise SystemExit(
                f"unknown {cls.__name__} field {name!r}; expected one of {sorted(known)}"
            )
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[name] = value
    return out, rest


def main(argv: list[str]) -> dict[str, Any]:
    over, rest = residual_overrides(argv)
    ppo_over, rest = residual_overrides(rest, "residual_ppo", ResidualPPOConfig)
    args = key_values(
        rest,
        {
            "algo": "residual",
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
    if args["algo"] not in ("residual", "residual_ppo"):
        raise SystemExit(f"algo must be residual or residual_ppo, got {args['algo']!r}")
    ppo = args["algo"] == "residual_ppo"
    if (ppo and over) or (not ppo and ppo_over):
        raise SystemExit("residual.* goes with algo=residual, residual_ppo.* with residual_ppo")
    torch.set_num_threads(1)
    timing, demos = PRESETS[args["preset"]], int(args["demos"])
    runs = []
    for seed in [int(s) for s in args["seeds"].split(",")]:
        row: dict[str, Any] = {"preset": args["preset"], "demos": demos, "seed": seed}
        if ppo:
            row["algo"], row["residual_ppo"] = "residual_ppo", ppo_over
            run = PPORunConfig(eval_episodes=50, seed=seed)
            row.update(train_and_evaluate(timing, ResidualPPOConfig(**ppo_over), run, demos=demos))
        else:
            train = TrainConfig(
                total_steps=int(args["total_steps"]),
                eval_every=int(args["eval_every"]),
                eval_episodes=50,
                seed=seed,
            )
            row["residual"] = over
            row.update(train_and_evaluate(timing, ResidualConfig(**over), train, demos=demos))
        print(json.dumps(row), flush=True)
        runs.append(row)
    summary = {
        "algo": args["algo"],
        "preset": args["preset"],
        "demos": demos,
        "residual": ppo_over if ppo else over,
        "base_success": float(np.mean([r["base_success"] for r in runs])),
        "success": float(np.mean([r["success"] for r in runs])),
        "per_seed": [r["success"] for r in runs],
    }
    print(json.dumps(summary), flush=True)
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])

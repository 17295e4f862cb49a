"""Residual RL on a biased BC base vs SAC from scratch, same task, same env-step budget; JSON.

Usage: python bench/residual_vs_sac.py checkpoint=<biased base> demos=<store> [total_steps=...]
       [sac_steps=...] [any train-rl override]

The residual run stops at 90 % evaluated success (or its budget); SAC then gets
``max(sac_steps, 5 x the residual's steps)`` env steps from scratch. The ratio reported is
SAC's steps to 90 % (or "not reached within its budget") over the residual's.
"""

from __future__ import annotations

import json
import sys

from robotrl.benchmarks.sac_baseline import run_sac
from robotrl.cli import compose
from robotrl.commands.train_rl import run_train_rl

if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("sac_steps=")]
    sac_steps = [int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("sac_steps=")]
    cfg = compose("train_rl", ["target_success=0.9", "progress=false", *args])
    res = run_train_rl(cfg)
    budget = max(sac_steps[0] if sac_steps else 0, 5 * res["env_steps"])
    from policies.checkpoint import read_config

    keys = list(read_config(cfg.checkpoint)["config"]["state_dims"])
    sac = run_sac(res["task"], keys, budget, eval_every=max(budget // 10, 1000))
    sac_to_90 = next((c["env_steps"] for c in sac["curve"] if c["success_rate"] >= 0.9), None)
    out = {
        "task": res["task"],
        "residual": {
            k: res[k]
            for k in (
                "base_success",
                "final_success",
                "best_success",
                "env_steps",
                "steps_to_target",
                "wall_s",
            )
        },
        "sac": {
            "env_steps": budget,
            "wall_s": sac["wall_s"],
            "steps_to_90": sac_to_90,
            "best_success": max((c["success_rate"] for c in sac["curve"]), default=None),
            "curve": sac["curve"],
        },
        "sac_steps_over_residual_steps": (
            round(sac_to_90 / res["steps_to_target"], 2)
            if sac_to_90 and res["steps_to_target"]
            else f">= {budget / max(res['steps_to_target'] or res['env_steps'], 1):.1f} "
            "(SAC never reached 90 %)"
        ),
        "run_dir": res["run_dir"],
    }
    print(json.dumps(out))

"""Safety-reflex latency per tick against a 1 ms budget; JSON.

Usage: python bench/reflex.py [critic=<exported .npz>] [ticks=20000]

Times, round-robin in one run (so machine load hits each alike), with one thread:
- ``reflex_tick``: :meth:`controllers.reflex.Reflex.tick`, the whole per-tick decision (critic
  on the command and four recovery candidates, candidate choice), with the given export or a
  fresh critic of the default size (2 x 64 hidden, 10 features);
- ``reflex_tick_with_features``: the same plus computing the features from MuJoCo state in the
  sim (:meth:`sim.safety_guard.SafetyGuard.features`);
- ``safety_filter_torque``: :meth:`SafetyFilter.filter_torque`, the deterministic per-tick
  filter, as the baseline every tick already pays.
Reports median and p99 [us], the p99 share of the 1 ms budget (libfranka's control period),
the ratio to the filter, and env steps/s with safety filter / monitor / reflex.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

BUDGET_US = 1000.0


def _stats(samples: list[float]) -> dict[str, float]:
    a = np.asarray(samples) * 1e6
    return {
        "median_us": round(float(np.median(a)), 2),
        "p99_us": round(float(np.percentile(a, 99)), 2),
    }


def main(argv: list[str]) -> dict:
    import torch

    torch.set_num_threads(1)
    args = dict(a.split("=", 1) for a in argv)
    ticks = int(args.get("ticks", 20000))
    import sim
    from controllers import panda
    from controllers.reflex import Reflex, RiskMLP
    from robotrl.algos.safety_critic import SafetyCritic

    critic = args.get("critic")
    if critic is None:
        path = Path("outputs/bench_reflex_critic.npz")
        SafetyCritic(10, 7).export(path)
        critic = str(path)
    env = sim.make("peg_insert", safety="reflex", safety_kwargs={"critic": critic})
    env.reset(seed=0)
    guard = env.guard
    reflex = Reflex(RiskMLP.from_file(critic))
    feats = guard.features().copy()
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (64, 7))
    forces = rng.normal(0, 10, (64, 3))
    filt = env.safety
    taus = rng.normal(0, 20, (64, 7))
    q, dq = panda.Q_HOME.copy(), np.zeros(7)
    out = {"reflex_tick": [], "reflex_tick_with_features": [], "safety_filter_torque": []}
    clock = time.perf_counter
    for i in range(ticks):
        j = i % 64
        t0 = clock()
        reflex.tick(feats, actions[j], forces[j])
        t1 = clock()
        f = guard.features()
        reflex.tick(f, actions[j], f[6:9])
        t2 = clock()
        filt.filter_torque(taus[j], q, dq)
        t3 = clock()
        out["reflex_tick"].append(t1 - t0)
        out["reflex_tick_with_features"].append(t2 - t1)
        out["safety_filter_torque"].append(t3 - t2)
    res: dict = {"ticks": ticks, "budget_us": BUDGET_US, "critic": critic}
    for k, v in out.items():
        res[k] = _stats(v)
        res[k]["p99_share_of_budget"] = round(res[k]["p99_us"] / BUDGET_US, 4)
    base = res["safety_filter_torque"]["median_us"]
    for k in ("reflex_tick", "reflex_tick_with_features"):
        res[k]["median_over_filter"] = round(res[k]["median_us"] / base, 2)
    res["within_budget"] = res["reflex_tick_with_features"]["p99_us"] < BUDGET_US
    env.close()
    steps = {}
    for mode, kw in (("filter", {}), ("monitor", {"safety": "monitor"})):
        steps[mode] = kw
    steps["reflex"] = {"safety": "reflex", "safety_kwargs": {"critic": critic}}
    res["env_steps_per_s"] = {}
    for mode, kw in steps.items():
        e = sim.make("peg_insert", **kw)
        e.reset(seed=0)
        a = np.zeros(7, np.float32)
        a[6] = 1.0
        t0 = clock()
        for _ in range(200):
            e.step(a)
        res["env_steps_per_s"][mode] = round(200 / (clock() - t0), 1)
        e.close()
    return res


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

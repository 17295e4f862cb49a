"""Two trainings on shared cores: each one's speed alone and beside a second one; prints JSON.

The workload is the residual learner's update at 10 critics of width 256, batch 256 (the
default until 2026-11-26; learner-bound, the case where thread settings matter most), in a fresh
process per run. Variants:

- ``libgomp_default``: idle OpenMP workers spin 300 000 times before sleeping (libgomp's
  default, what two commands did before the CLI set the spin count), one thread per core;
- ``robotrl``: the CLI's setting (``GOMP_SPINCOUNT=3000``), one thread per core;
- ``passive``: idle workers sleep at once (``OMP_WAIT_POLICY=PASSIVE``), one thread per core;
- ``one_thread``: ``threads=1`` in each run (with the CLI's spin count).

``pair_over_solo`` is each run's updates/s beside the other, as a share of the same variant's
solo updates/s (the issue's target: >= 0.4).

    python bench/concurrency.py [--updates 150]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

WORKLOAD = """
import sys, time, numpy as np, torch
from robotrl.algos.residual import ResidualAgent, ResidualConfig
threads, updates = int(sys.argv[1]), int(sys.argv[2])
if threads:
    torch.set_num_threads(threads)
cfg = ResidualConfig(hidden=256, batch_size=256)  # learner-bound: the pre-2026-11-26 default
O, A, B = 40, 7, cfg.batch_size
agent = ResidualAgent(O, A, cfg)
rng = np.random.default_rng(0)
def batch():
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    return {"obs": {"features": f(B, O), "base_action": f(B, A)},
            "next_obs": {"features": f(B, O), "base_action": f(B, A)},
            "action": f(B, A), "reward": f(B), "discount": np.full(B, 0.97, np.float32)}
batches = [batch() for _ in range(4)]
for i in range(5):
    agent.update(batches[i % 4])
t0 = time.perf_counter()
for i in range(updates):
    agent.update(batches[i % 4])
print(updates / (time.perf_counter() - t0))
"""

VARIANTS = {
    "libgomp_default": ({"GOMP_SPINCOUNT": "300000"}, 0),
    "robotrl": ({"GOMP_SPINCOUNT": "3000"}, 0),
    "passive": ({"OMP_WAIT_POLICY": "PASSIVE"}, 0),
    "one_thread": ({"GOMP_SPINCOUNT": "3000"}, 1),
}


def _start(env: dict[str, str], threads: int, updates: int) -> subprocess.Popen:
    drop = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
    full = {k: v for k, v in os.environ.items() if k not in drop}
    full.update(env)
    cmd = [sys.executable, "-c", WORKLOAD, str(threads), str(updates)]
    return subprocess.Popen(cmd, env=full, stdout=subprocess.PIPE, text=True)


def _rate(proc: subprocess.Popen) -> float:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"workload failed with exit code {proc.returncode}")
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--updates", type=int, default=150)
    args = parser.parse_args()
    result: dict = {
        "workload": "ResidualAgent.update, default ResidualConfig",
        "cores": os.cpu_count(),
    }
    for name, (env, threads) in VARIANTS.items():
        solo = _rate(_start(env, threads, args.updates))
        pair = [_start(env, threads, args.updates) for _ in range(2)]
        rates = [_rate(p) for p in pair]
        result[name] = {
            "solo_updates_per_s": round(solo, 2),
            "pair_updates_per_s": [round(r, 2) for r in rates],
            "pair_over_solo": [round(r / solo, 3) for r in rates],
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()

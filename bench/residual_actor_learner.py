"""Split residual RL with process kills: the toy task always, the lift sim task optionally; JSON.

Usage: python bench/residual_actor_learner.py [toy_steps=3000] [toy_hz=25]
       [lift_checkpoint=<BC base on lift> lift_demos=<store> lift_steps=2000 lift_kill_after=20
       lift_hz=10]

toy: ``run`` of ``tests/residual_demo.py`` (PointGoal, biased base) on a two-node Ray cluster
on this machine: the actor is SIGKILLed at 400 env steps and restarted, the learner's process
SIGKILLed at 700 env steps (Ray restarts it); reports the evaluated success curve, accounting
and reconnects.

lift (when ``lift_checkpoint`` is given): ``robotrl train-rl role=learner`` (its own local Ray
instance) and ``role=actor`` joining it; the learner's process is SIGKILLed ``lift_kill_after``
s after its first checkpoint (Ray restarts it from that checkpoint); reports both processes'
summaries.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from robotrl.algos.residual_split import RoleProcess

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the toy scenario
from residual_demo import run


def lift(
    checkpoint: str, demos: str, steps: int, kill_after: float, hz: float = 10.0
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "learner_state"
        common = [
            f"checkpoint={checkpoint}",
            f"demos={demos}",
            f"total_steps={steps}",
            "warmup_steps=300",
            "critic_warmup_updates=200",
            f"eval_every={max(steps // 4, 1)}",
            "eval_episodes=5",
            "residual.hidden=128",
            "residual.ensemble=5",
            "residual.batch_size=128",
            "residual.utd=1",
            "videos=0",
            "progress=false",
            f"output_dir={tmp}",
            f"dist.learner_state={state}",
            "dist.checkpoint_every_s=1.0",
            "dist.outbox_batches=64",
            "dist.batch_max_age=1.0",  # ~10 transitions per message at 10 Hz
            f"dist.actor_hz={hz}",  # a robot's control rate: the learner keeps up
        ]
        cli = [sys.executable, "-m", "robotrl.cli", "train-rl", *common]
        t0 = time.time()
        learner = RoleProcess([*cli, "role=learner"], "learner")
        ready = learner.wait_for(lambda m: m.get("event") == "ready", 600)
        actor = RoleProcess([*cli, "role=actor", f"ray.address={ready['address']}"], "actor")
        killed_at = restarted_at = None
        try:
            while not (state / "latest").exists() and actor.proc.poll() is None:
                time.sleep(0.2)  # a bench, not a test: polling a file is fine here
            time.sleep(kill_after)
            if actor.proc.poll() is None:
                os.kill(int(ready["pid"]), signal.SIGKILL)  # the learner's Ray actor process
                killed_at = time.time() - t0
                learner.wait_for(lambda m: m.get("event") == "ready" and m["restarted"], 600)
                restarted_at = time.time() - t0
            actor.wait(3600)
        finally:
            learner.stop(120)
            if actor.proc.poll() is None:
                actor.kill()
        a, ln = actor.last, learner.last
    return {
        "task": "lift",
        "learner_killed_at_s": killed_at,
        "learner_restarted_at_s": restarted_at,
        "wall_s": round(time.time() - t0, 1),
        "actor": {k: v for k, v in a.items() if k not in ("plot", "run_dir")},
        "learner": {k: v for k, v in ln.items() if k not in ("checkpoint", "run_dir")},
        "accounting_exact": bool(a)
        and a.get("flushed")
        and a["sent"] == a["acked"] + a["dropped"] + a["rejected"],
    }


if __name__ == "__main__":
    args = dict(a.split("=", 1) for a in sys.argv[1:])
    out: dict[str, Any] = {
        "toy": run(total_steps=int(args.get("toy_steps", 3000)), hz=float(args.get("toy_hz", 25)))
    }
    if "lift_checkpoint" in args:
        out["lift"] = lift(
            args["lift_checkpoint"],
            args["lift_demos"],
            int(args.get("lift_steps", 2000)),
            float(args.get("lift_kill_after", 20)),
            float(args.get("lift_hz", 10)),
        )
    print(json.dumps(out))

"""A recorded teleop session over DDS vs the same session in-process: identical stores?

Runs ``robotrl collect device=expert`` (the in-process baseline) and the same session over
Cyclone DDS on loopback: ``robotrl-teleop-node`` (expert, lockstep) and
``robotrl-recorder-node`` as separate processes, and the sim robot as a third process,
``robotrl-sim-robot lockstep:=true`` (``--sim node``, default) or as the test helper's lockstep
sim in this process (``--sim thread``, tests/ros2_fakes.py). Prints one JSON line: steps,
differences between the stores (``diff_stores``: every array and outcome bit for bit,
wall-clock fields aside), wall times, and the DDS session's speed as a ratio of the
in-process one.

    OMP_NUM_THREADS=1 python bench/teleop_session_dds.py --episodes 10 --task lift
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _json_line(text: str) -> dict:
    lines = [ln for ln in text.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--task", default="lift")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--noise", type=float, default=0.3)
    ap.add_argument("--sim", choices=("node", "thread"), default="node")
    ap.add_argument("--out", default="", help="keep the stores here (default: a temp dir)")
    args = ap.parse_args()

    from hardware.ros2.transport import CycloneTransport, loopback_config

    os.environ.setdefault("CYCLONEDDS_URI", loopback_config())
    os.environ["ROS_DOMAIN_ID"] = str(random.randint(1, 230))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out = Path(args.out or tempfile.mkdtemp(prefix="teleop_dds_"))
    ref, ros = out / "in_process.zarr", out / "dds.zarr"
    for store_dir in (ref, ros):
        shutil.rmtree(store_dir, ignore_errors=True)
    common = [f"task={args.task}", f"seed={args.seed}", "operator=bench"]

    t = time.monotonic()
    done = subprocess.run(
        [
            "robotrl",
            "collect",
            "device=expert",
            f"episodes={args.episodes}",
            f"out={ref}",
            f"expert_noise={args.noise}",
            "viewer=off",
            *common,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    in_process = _json_line(done.stdout)
    in_process_wall = time.monotonic() - t

    p = ["-p"]
    recorder = subprocess.Popen(
        [
            "robotrl-recorder-node",
            "--ros-args",
            "-r",
            "__node:=recorder",
            *p,
            "profile:=sim",
            *p,
            f"out:={ros}",
            *p,
            f"task:={args.task}",
            *p,
            "operator:=bench",
            *p,
            "task_state:=true",
            *p,
            f"episodes:={args.episodes}",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    sim_proc: subprocess.Popen | None = None
    sim_thread: Any = None
    transport: CycloneTransport | None = None
    if args.sim == "node":
        sim_proc = subprocess.Popen(
            [
                "robotrl-sim-robot",
                "--ros-args",
                *p,
                f"task:={args.task}",
                *p,
                "lockstep:=true",
                *p,
                "profile:=sim",
            ],
        )
    else:
        sys.path.insert(0, str(ROOT / "tests"))
        from ros2_fakes import LockstepSim  # type: ignore[import-not-found]

        transport = CycloneTransport(int(os.environ["ROS_DOMAIN_ID"]), "sim_robot")
        sim_thread = LockstepSim(transport, args.task)
    t = time.monotonic()
    teleop = subprocess.run(
        [
            "robotrl-teleop-node",
            "--ros-args",
            "-r",
            "__node:=teleop",
            *p,
            "profile:=sim",
            *p,
            "device:=expert",
            *p,
            f"task:={args.task}",
            *p,
            "lockstep:=true",
            *p,
            f"episodes:={args.episodes}",
            *p,
            f"seed:={args.seed}",
            *p,
            f"expert_noise:={args.noise}",
            *p,
            "wait_subscribers:=2",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    try:
        rec_out, _ = recorder.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # it waits for episodes that never came: stop it
        recorder.terminate()
        rec_out, _ = recorder.communicate(timeout=30)
    dds_wall = time.monotonic() - t
    if sim_thread is not None and transport is not None:
        sim_thread.close()
        transport.close()
    if sim_proc is not None:
        sim_proc.terminate()
        sim_proc.wait(timeout=30)

    from robotrl.datasets import EpisodeStore
    from robotrl.datasets.store_diff import diff_stores

    a, b = EpisodeStore.open(ref), EpisodeStore.open(ros)
    diffs = diff_stores(a, b)
    rec_stats = _json_line(rec_out)
    session_s = float(_json_line(teleop.stdout).get("wall_s") or dds_wall)
    steps = int(a.num_steps)
    print(
        json.dumps(
            {
                "bench": "teleop_session_dds",
                "task": args.task,
                "episodes": args.episodes,
                "sim": args.sim,
                "steps_in_process": steps,
                "steps_dds": int(b.num_steps),
                "successes": int(a.meta("success").sum()),
                "identical": diffs == [],
                "differences": diffs,
                "compared_keys": sorted(set(a.keys) - {"timestamp"}),
                "recorder": {k: rec_stats.get(k) for k in ("recorded", "discarded", "reasons")},
                "teleop_exit": teleop.returncode,
                "in_process_wall_s": round(in_process_wall, 2),
                "in_process_steps_per_s": in_process.get("steps_per_s"),
                "dds_wall_s": round(dds_wall, 2),
                "dds_session_s": round(session_s, 2),  # first reset to last step
                "dds_steps_per_s": round(steps / session_s, 1),
                "dds_over_in_process_speed": round(
                    (steps / session_s) / max(in_process.get("steps_per_s") or 1e-9, 1e-9), 2
                ),
                "teleop_stderr_tail": teleop.stderr[-600:] if teleop.returncode else "",
                "out": str(out),
            }
        )
    )


if __name__ == "__main__":
    main()

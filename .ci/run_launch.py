"""Run a launch file's processes without ROS 2 installed: ``ros2 launch`` cannot be installed on
this machine, so the launch description is evaluated against the tests' stub of ``launch`` /
``launch_ros`` (tests/test_launch_files.py), and the processes it would start for the given
``name:=value`` arguments are started here, all at once, as ``ros2 launch`` would. When the
process named by ``--wait`` exits, the others get SIGINT (then SIGTERM); its exit code and last
stdout line are printed.

    python .ci/run_launch.py launch/policy_deploy.launch.py --wait robotrl_policy \\
        checkpoint:=<dir> use_sim:=true profile:=sim episodes:=3
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_launch_files import _processes  # noqa: E402 - the stub lives with its tests


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("launch_file", type=Path)
    ap.add_argument("--wait", required=True, help="process name whose exit ends the launch")
    ap.add_argument("--timeout", type=float, default=1800.0, help="[s] before giving up")
    ap.add_argument("arguments", nargs="*", help="name:=value launch arguments")
    args = ap.parse_intermixed_args()
    overrides = dict(a.split(":=", 1) for a in args.arguments)
    procs = _processes(args.launch_file.resolve(), overrides)
    names = [n for n, _ in procs]
    if args.wait not in names:
        raise SystemExit(f"{args.launch_file.name} starts {names}, not {args.wait!r}")
    running = {}
    for name, cmd in procs:
        print(f"+ [{name}] {' '.join(cmd)}", flush=True)
        out = subprocess.PIPE if name == args.wait else subprocess.DEVNULL
        running[name] = subprocess.Popen(cmd, stdout=out, text=True)
    try:
        stdout, _ = running[args.wait].communicate(timeout=args.timeout)
        rc = running[args.wait].returncode
    finally:
        for p in running.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in running.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.terminate()
    last = (stdout or "").strip().splitlines()[-1:] or [""]
    print(f"= [{args.wait}] exit {rc}: {last[0]}", flush=True)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())

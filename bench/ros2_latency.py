"""JointState round trip over Cyclone DDS on loopback at 1 kHz: p50 / p99 latency.

A child process echoes ``/ping`` (sensor_msgs/JointState, 9 joints as a Franka publishes) back
on ``/pong``; this process publishes at ``--rate`` Hz for ``--seconds`` and measures the round
trip per message (the monotonic send time travels in the header stamp). Baseline measured in
the same run: the same serialised bytes echoed through plain UDP sockets on 127.0.0.1 by a child
process (the floor a Python process pair reaches on this machine), so ``dds_over_udp_p50`` /
``_p99`` say what DDS + our (de)serialisation add. Prints one JSON line.

    OMP_NUM_THREADS=1 python bench/ros2_latency.py --rate 1000 --seconds 10
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np

ECHO_DDS = """
import sys, time
from hardware.ros2 import messages as m
from hardware.ros2.transport import CycloneTransport
tr = CycloneTransport(int(sys.argv[1]), "echo")
pub = tr.publisher("/pong", m.JointState)
tr.subscribe("/ping", m.JointState, pub.publish)
print("ready", flush=True)
sys.stdin.read()
tr.close()
"""

ECHO_UDP = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1], flush=True)
while True:
    data, addr = s.recvfrom(65536)
    if data == b"stop":
        break
    s.sendto(data, addr)
"""


def _pace(rate: float, n: int, send) -> None:
    """Call ``send(i)`` n times at ``rate`` Hz (sleep, then spin the last 0.3 ms)."""
    period = 1.0 / rate
    t_next = time.perf_counter()
    for i in range(n):
        while True:
            left = t_next - time.perf_counter()
            if left <= 0:
                break
            if left > 3e-4:
                time.sleep(left - 3e-4)
        send(i)
        t_next += period


def _stats(rtt_ns: list[int], sent: int) -> dict[str, float]:
    a = np.asarray(rtt_ns, dtype=float) / 1e6
    if a.size == 0:
        return {"received": 0, "sent": sent}
    return {
        "sent": sent,
        "received": int(a.size),
        "p50_ms": round(float(np.percentile(a, 50)), 4),
        "p90_ms": round(float(np.percentile(a, 90)), 4),
        "p99_ms": round(float(np.percentile(a, 99)), 4),
        "max_ms": round(float(a.max()), 4),
        "mean_ms": round(float(a.mean()), 4),
    }


def bench_dds(rate: float, seconds: float, warmup: float) -> dict[str, float]:
    from hardware.ros2 import messages as m
    from hardware.ros2.transport import CycloneTransport, loopback_config

    os.environ.setdefault("CYCLONEDDS_URI", loopback_config())
    domain = random.randint(1, 230)
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(ECHO_DDS), str(domain)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        child.stdout.readline()
        tr = CycloneTransport(domain, "ping")
        rtts: list[int] = []
        measuring = [False]

        def on_pong(msg: m.JointState) -> None:
            if measuring[0]:
                rtts.append(time.monotonic_ns() - m.time_ns(msg.header.stamp))

        sub = tr.subscribe("/pong", m.JointState, on_pong)
        pub = tr.publisher("/ping", m.JointState)
        end = time.monotonic() + 15
        while (pub.matched_count() < 1 or sub.matched_count() < 1) and time.monotonic() < end:
            time.sleep(0.01)
        names = [f"fr3_joint{i}" for i in range(1, 8)] + ["fr3_finger_joint1", "fr3_finger_joint2"]
        values = [0.1 * i for i in range(9)]

        def send(_i: int) -> None:
            pub.publish(
                m.JointState(
                    header=m.Header(stamp=m.stamp(time.monotonic_ns()), frame_id="fr3_link0"),
                    name=names,
                    position=values,
                    velocity=values,
                    effort=values,
                )
            )

        _pace(rate, int(rate * warmup), send)
        time.sleep(0.05)
        measuring[0] = True
        n = int(rate * seconds)
        _pace(rate, n, send)
        time.sleep(0.2)
        measuring[0] = False
        size = len(
            m.JointState(name=names, position=values, velocity=values, effort=values).serialize()
        )
        tr.close()
        return {**_stats(rtts, n), "bytes": size}
    finally:
        child.stdin.close()
        child.wait(timeout=10)


def bench_udp(rate: float, seconds: float, warmup: float, payload: bytes) -> dict[str, float]:
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(ECHO_UDP)], stdout=subprocess.PIPE, text=True
    )
    port = int(child.stdout.readline())
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.1)
    rtts: list[int] = []
    try:

        def send(_i: int, record: bool) -> None:
            t = time.monotonic_ns()
            s.sendto(payload, ("127.0.0.1", port))
            try:
                s.recvfrom(65536)
            except TimeoutError:
                return
            if record:
                rtts.append(time.monotonic_ns() - t)

        _pace(rate, int(rate * warmup), lambda i: send(i, False))
        n = int(rate * seconds)
        _pace(rate, n, lambda i: send(i, True))
        return _stats(rtts, n)
    finally:
        s.sendto(b"stop", ("127.0.0.1", port))
        child.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=1000.0, help="messages per second")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured duration [s]")
    ap.add_argument("--warmup", type=float, default=1.0, help="unmeasured lead-in [s]")
    args = ap.parse_args()
    from hardware.ros2 import messages as m

    payload = m.JointState(
        name=[f"fr3_joint{i}" for i in range(1, 10)], position=[0.0] * 9, velocity=[0.0] * 9
    ).serialize()
    dds = bench_dds(args.rate, args.seconds, args.warmup)
    udp = bench_udp(args.rate, args.seconds, args.warmup, payload)
    out = {
        "bench": "ros2_latency",
        "message": "sensor_msgs/JointState (9 joints)",
        "rate_hz": args.rate,
        "seconds": args.seconds,
        "transport": "cyclonedds (python), 2 processes, loopback",
        "dds": dds,
        "udp_baseline": udp,
        "target_p99_ms": 2.0,
        "meets_target": bool(dds.get("p99_ms", 1e9) < 2.0),
    }
    if "p50_ms" in dds and "p50_ms" in udp:
        out["dds_over_udp_p50"] = round(dds["p50_ms"] / udp["p50_ms"], 2)
        out["dds_over_udp_p99"] = round(dds["p99_ms"] / udp["p99_ms"], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

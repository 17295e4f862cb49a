"""ROS 2 bags of robotrl topics: record from a transport, replay onto one (``rosbags``, no ROS).

- :class:`BagRecorder` subscribes topics and writes every message's CDR bytes (what
  ``msg.serialize()`` gives; equal to ``rosbags``' ``serialize_cdr``, see tests/test_messages.py)
  into a rosbag2 (sqlite3 or MCAP) that ``ros2 bag play`` / ``rosbags`` read. The bag time is
  the receive time (``clock="receive"``, what ``ros2 bag record`` does) or, for lockstep sims,
  the sim clock (``clock="stamp"``: a stamped message's header stamp; a message without header
  gets the newest stamp seen so far + 1 ns, so it sorts right after the state it answered).
- :func:`replay_bag` publishes a bag's messages onto a transport at the bag's timing (scaled
  by ``rate``), each topic with the message class of its recorded type.

:func:`robotrl.datasets.rosbag_import.bag_topics` maps a topic profile to the importer's topics,
so ``robotrl dataset import --from rosbag`` reads what is recorded here.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hardware.ros2.observation import StateCache
from hardware.ros2.topics import TopicProfile, topic_profile

STORAGES = ("sqlite3", "mcap")
# A writer sees a reader matched before the reader has matched the writer back; samples sent in
# between are dropped by the reader (measured: the first of 20 lost), so wait a little more.
DISCOVERY_SETTLE_S = 0.2


class BagError(RuntimeError):
    """A bag that cannot be written or replayed (exists already, unknown message types)."""


def _typestore() -> Any:
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_HUMBLE)


class BagRecorder:
    """Records ``topics`` (topic -> message class) from ``transport`` into a new bag at ``path``.

    Args:
        path: bag directory to create (must not exist).
        transport: a :class:`hardware.ros2.transport.Transport`.
        topics: topic -> :mod:`hardware.ros2.messages` class.
        storage: ``sqlite3`` (ROS 2 Humble's default) or ``mcap``.
        clock: ``receive`` (wall clock on arrival [ns since epoch]) or ``stamp`` (sim clock).
        qos: subscription QoS (default: the transport's reliable default).

    Callbacks only serialise and append under a lock; :meth:`close` (or the context manager)
    finishes the bag, which is unreadable until then (rosbag2's metadata is written last).
    """

    def __init__(
        self,
        path: str | Path,
        transport: Any,
        topics: Mapping[str, type],
        *,
        storage: str = "sqlite3",
        clock: str = "receive",
        qos: Any = None,
    ) -> None:
        # lazy: recording needs rosbags and cyclonedds, reading a bag neither
        from rosbags.rosbag2 import StoragePlugin, Writer

        from hardware.ros2.messages import (  # lazy: cyclonedds (the 'ros2' extra)
            ros_type_name,
            type_hash,
        )

        if storage not in STORAGES:
            raise BagError(f"storage must be one of {STORAGES}, got {storage!r}")
        if clock not in ("receive", "stamp"):
            raise BagError(f"clock must be 'receive' or 'stamp', got {clock!r}")
        if Path(path).exists():
            raise BagError(f"{path} exists; a bag is written into a new directory")
        self.path, self.clock = Path(path), clock
        self._lock = threading.Lock()
        self._last_stamp = 0
        self._closed = False
        self.counts: dict[str, int] = {t: 0 for t in topics}
        # rosbags' sqlite3 storage is bound to the thread that opened it: one writer thread
        # owns the Writer; transport callbacks only serialise and enqueue.
        self._queue: queue.SimpleQueue[tuple[str, int, bytes] | None] = queue.SimpleQueue()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        conns = {t: (ros_type_name(c), type_hash(c)) for t, c in topics.items()}
        self._thread = threading.Thread(
            target=self._write_loop, args=(Writer, plugin, conns), daemon=True
        )
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise BagError(f"cannot create bag {path}: {self._error}") from self._error
        self._subs = []
        for topic, cls in topics.items():

            def callback(msg: Any, topic: str = topic) -> None:
                self._put(topic, msg)

            args = (topic, cls, callback) if qos is None else (topic, cls, callback, qos)
            self._subs.append(transport.subscribe(*args))

    def _write_loop(self, writer_cls: Any, plugin: Any, conns: dict[str, tuple[str, str]]) -> None:
        try:
            writer = writer_cls(self.path, version=8, storage_plugin=plugin)
            writer.open()
            ts = _typestore()
            handles = {
                topic: writer.add_connection(topic, name, typestore=ts, rihs01=rihs)
                for topic, (name, rihs) in conns.items()
            }
        except Exception as exc:  # rosbags raises many types for unwritable paths
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            while (item := self._queue.get()) is not None:
                topic, t, data = item
                writer.write(handles[topic], t, data)
        finally:
            writer.close()

    def _put(self, topic: str, msg: Any) -> None:
        data = msg.serialize()
        with self._lock:
            if self._closed:
                return
            if self.clock == "receive":
                t = time.time_ns()
            elif hasattr(msg, "header"):
                st = msg.header.stamp
                t = int(st.sec) * 1_000_000_000 + int(st.nanosec)
                self._last_stamp = max(self._last_stamp, t)
            else:
                t = self._last_stamp + 1
            self._queue.put((topic, t, data))
            self.counts[topic] += 1

    def close(self) -> None:
        """Stop recording and finish the bag (idempotent)."""
        for sub in self._subs:
            sub.close()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(None)
        self._thread.join()

    def __enter__(self) -> BagRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_messages(
    path: str | Path, topics: Sequence[str] | None = None
) -> list[tuple[str, int, Any]]:
    """``(topic, bag time [ns], message)`` of a bag in time order, messages as
    :mod:`hardware.ros2.messages` objects (deserialised from the stored CDR bytes)."""
    from rosbags.highlevel import AnyReader

    from hardware.ros2.messages import (  # lazy: cyclonedds (the 'ros2' extra)
        MESSAGES,
        ros_type_name,
    )

    by_ros = {ros_type_name(c): c for n, c in MESSAGES.items()}
    out: list[tuple[str, int, Any]] = []
    with AnyReader([Path(path)], default_typestore=_typestore()) as reader:
        conns = [c for c in reader.connections if topics is None or c.topic in topics]
        unknown = sorted({c.msgtype for c in conns if c.msgtype not in by_ros})
        if unknown:
            raise BagError(f"{path}: no robotrl message class for {unknown}")
        for conn, t_ns, raw in reader.messages(connections=conns):
            out.append((conn.topic, int(t_ns), by_ros[conn.msgtype].deserialize(bytes(raw))))
    return out


def replay_bag(
    path: str | Path,
    transport: Any,
    *,
    rate: float = 1.0,
    topics: Sequence[str] | None = None,
    wait_subscribers: int = 0,
    wait_timeout_s: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Publish a bag's messages onto ``transport`` at the bag's timing (``rate`` x speed;
    ``rate=0`` as fast as possible); returns the number published. ``wait_subscribers``:
    first wait (up to ``wait_timeout_s``) until every topic has that many subscribers, since
    DDS discovery is asynchronous and messages sent before it are lost to late readers."""
    if rate < 0:
        raise BagError(f"rate must be >= 0, got {rate}")
    messages = read_messages(path, topics)
    if not messages:
        return 0
    pubs: dict[str, Any] = {}
    for topic, _, msg in messages:
        if topic not in pubs:
            pubs[topic] = transport.publisher(topic, type(msg))
    deadline = clock() + wait_timeout_s
    while any(p.matched_count() < wait_subscribers for p in pubs.values()):
        if clock() > deadline:
            short = sorted(t for t, p in pubs.items() if p.matched_count() < wait_subscribers)
            raise BagError(f"fewer than {wait_subscribers} subscribers on {short}")
        sleep(0.01)
    if wait_subscribers > 0:
        sleep(DISCOVERY_SETTLE_S)
    t_bag0, t0 = messages[0][1], clock()
    for topic, t_ns, msg in messages:
        if rate > 0:
            delay = t0 + (t_ns - t_bag0) / 1e9 / rate - clock()
            if delay > 0:
                sleep(delay)
        pubs[topic].publish(msg)
    return len(messages)


def profile_topics(
    profile: TopicProfile, *, task_state: bool = False, cameras: Sequence[str] = ()
) -> dict[str, type]:
    """Topic -> message class of a session: the profile's state topics, the executed action,
    the intervention flag, teleop twist/action and the episode protocol."""
    from hardware.ros2 import messages as m  # lazy: cyclonedds (the 'ros2' extra)

    cache = StateCache(profile, task_state=task_state, cameras=cameras)
    out = dict(cache.message_types())
    out[profile.action] = m.Float64MultiArray
    out[profile.intervention] = m.Bool
    out[profile.teleop_twist] = m.TwistStamped
    out[profile.teleop_action] = m.Float64MultiArray
    out[profile.episode] = m.Float64MultiArray
    out[profile.reset] = m.Float64MultiArray
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``robotrl-bag``: ``record`` a session's topics, ``play`` a bag onto DDS,
    ``info`` (topic -> message count and type)."""
    import argparse
    import json
    import signal
    import sys

    ap = argparse.ArgumentParser(prog="robotrl-bag", description=main.__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record the profile's topics into a new bag")
    rec.add_argument("path")
    rec.add_argument("--profile", default="franka")
    rec.add_argument("--task-state", action="store_true", help="also the sim's task_state")
    rec.add_argument("--storage", choices=STORAGES, default="sqlite3")
    rec.add_argument("--clock", choices=("receive", "stamp"), default="receive")
    rec.add_argument("--duration", type=float, default=0.0, help="[s]; 0: until Ctrl-C")
    rec.add_argument(
        "--progress", type=float, default=0.0, help="[s] between JSON lines of counts; 0: none"
    )
    play = sub.add_parser("play", help="publish a bag at its timing")
    play.add_argument("path")
    play.add_argument("--rate", type=float, default=1.0, help="speed factor; 0: unpaced")
    play.add_argument("--wait-subscribers", type=int, default=0, help="per topic, first")
    info = sub.add_parser("info", help="topics, types and message counts")
    info.add_argument("path")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)

    if args.command == "info":
        counts: dict[str, dict[str, Any]] = {}
        for topic, _, msg in read_messages(args.path):
            entry = counts.setdefault(topic, {"type": type(msg).__name__, "count": 0})
            entry["count"] += 1
        print(json.dumps({"bag": args.path, "topics": counts}), flush=True)
        return 0
    from hardware.ros2.transport import make_transport  # lazy: cyclonedds (the 'ros2' extra)

    with make_transport(node_name="robotrl_bag") as transport:
        if args.command == "play":
            n = replay_bag(
                args.path, transport, rate=args.rate, wait_subscribers=args.wait_subscribers
            )
            print(json.dumps({"bag": args.path, "published": n}), flush=True)
            return 0
        topics = profile_topics(topic_profile(args.profile), task_state=args.task_state)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        recorder = BagRecorder(args.path, transport, topics, storage=args.storage, clock=args.clock)
        end = time.monotonic() + args.duration if args.duration > 0 else math.inf
        try:
            while not stop.is_set() and time.monotonic() < end:
                period = args.progress if args.progress > 0 else math.inf
                wait = min(period, end - time.monotonic())
                if stop.wait(None if math.isinf(wait) else max(wait, 0.0)):
                    break
                if args.progress > 0:
                    recording = dict(recorder.counts)
                    print(json.dumps({"bag": args.path, "recording": recording}), flush=True)
        except KeyboardInterrupt:
            pass
        finally:
            recorder.close()
        print(json.dumps({"bag": args.path, "counts": recorder.counts}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

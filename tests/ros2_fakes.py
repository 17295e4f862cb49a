"""Test helpers for the ROS 2 nodes: an in-memory transport and a lockstep sim speaking the
sim robot's topics and episode protocol (``hardware/ros2/topics.py``) over any transport."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

import sim
from hardware.ros2 import messages as m
from hardware.ros2.observation import state_messages
from hardware.ros2.topics import SIM, TopicProfile


class _FakePublisher:
    def __init__(self, bus: FakeTransport, topic: str, msg_type: type) -> None:
        self.bus, self.topic, self.msg_type = bus, topic, msg_type

    def publish(self, msg: Any) -> None:
        if type(msg) is not self.msg_type:
            raise TypeError(f"expected {self.msg_type.__name__}, got {type(msg).__name__}")
        self.bus.sent[self.topic].append(msg)
        for cb in list(self.bus.subs[self.topic]):
            cb(msg)

    def matched_count(self) -> int:
        return len(self.bus.subs[self.topic])


class _FakeSubscription:
    def __init__(self, bus: FakeTransport, topic: str, cb: Callable) -> None:
        self.bus, self.topic, self.cb = bus, topic, cb

    def matched_count(self) -> int:
        return 1

    def close(self) -> None:
        if self.cb in self.bus.subs[self.topic]:
            self.bus.subs[self.topic].remove(self.cb)


class FakeTransport:
    """Synchronous in-memory pub/sub: ``publish`` calls every subscriber's callback in the
    publishing thread; ``sent[topic]`` keeps every message."""

    def __init__(self) -> None:
        self.subs: dict[str, list[Callable]] = defaultdict(list)
        self.sent: dict[str, list[Any]] = defaultdict(list)

    def publisher(self, topic: str, msg_type: type, qos: Any = None) -> _FakePublisher:
        return _FakePublisher(self, topic, msg_type)

    def subscribe(self, topic: str, msg_type: type, cb: Callable, qos: Any = None) -> Any:
        self.subs[topic].append(cb)
        return _FakeSubscription(self, topic, cb)

    def close(self) -> None:
        self.subs.clear()

    def __enter__(self) -> FakeTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LockstepSim:
    """A MuJoCo env stepped once per ``action`` message, reset per ``reset`` message; after each
    it publishes the state (stamped ``n * period``, n counting every published step) and then
    the ``episode`` message. Work runs on its own thread (callbacks only enqueue).

    Args:
        transport: any transport.
        task: sim task.
        profile: topics (the ``sim`` profile).
    """

    def __init__(self, transport: Any, task: str = "lift", profile: TopicProfile = SIM) -> None:
        self.env = sim.make(task)
        self.profile = profile
        self.task_keys = list(self.env.task.observation_sizes())
        self.period_ns = round(1e9 / self.env.control_hz)
        self._n = 0
        self._seed = 0
        self._step = 0
        self._pubs: dict[str, Any] = {}
        self._transport = transport
        self._queue: list[tuple[str, Any]] = []
        self._cv = threading.Condition()
        self._episode = transport.publisher(profile.episode, m.Float64MultiArray)
        transport.subscribe(profile.reset, m.Float64MultiArray, lambda msg: self._put("r", msg))
        transport.subscribe(profile.action, m.Float64MultiArray, lambda msg: self._put("a", msg))
        self._stop = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _put(self, kind: str, msg: Any) -> None:
        with self._cv:
            self._queue.append((kind, msg))
            self._cv.notify()

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()
        self.thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stop:
                    self._cv.wait()
                if self._stop:
                    return
                kind, msg = self._queue.pop(0)
            if kind == "r":
                self._seed, self._step = int(msg.data[0]), 0
                obs, _ = self.env.reset(seed=self._seed)
                self._publish(obs, 0.0, False, False, False)
            else:
                obs, reward, term, trunc, info = self.env.step(np.asarray(msg.data))
                self._step += 1
                self._publish(obs, reward, bool(info["success"]), term, trunc)

    def _publish(self, obs: dict, reward: float, success: bool, term: bool, trunc: bool) -> None:
        self._n += 1
        t = self._n * self.period_ns
        for topic, msg in state_messages(obs, t, self.profile, task_keys=self.task_keys).items():
            if topic not in self._pubs:
                self._pubs[topic] = self._transport.publisher(topic, type(msg))
            self._pubs[topic].publish(msg)
        sec, nsec = divmod(t, 1_000_000_000)
        data = [self._seed, self._step, reward, success, term, trunc, sec, nsec]
        self._episode.publish(m.Float64MultiArray(data=[float(x) for x in data]))

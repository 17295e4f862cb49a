"""Teleop data-collection sessions: a device drives the env, every finished episode is committed
to the crash-safe episode store, the operator labels, re-records or quits with keys.

The session is the same for sim and hardware (any Gymnasium env with the robotrl observation
dict); what it never does is lose a finished episode: each is committed (fsynced, atomically
published) before the next starts, and Ctrl-C, a device disconnect or an exception discards only
the episode being recorded.

Episode end: the env terminates (sim success) or truncates, or the operator presses success /
failure. ``rerecord`` drops the current episode and starts it again; ``quit`` drops it and
ends the session.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from hardware.devices import DeviceDisconnected, ExpertDevice, TeleopDevice
from robotrl.datasets import EpisodeStore

STATUS_PERIOD = 0.25  # [s] between live status updates on a terminal
LANGUAGE_KEY = "language"  # the instruction in an observation (str): episode metadata


def _arrays(obs: dict[str, Any]) -> dict[str, Any]:
    """The observation without its instruction: what is recorded per step."""
    return {k: v for k, v in obs.items() if k != LANGUAGE_KEY}


@dataclass
class SessionStats:
    """What a session recorded; ``discarded`` counts re-recorded and aborted episodes."""

    recorded: int = 0
    successes: int = 0
    discarded: int = 0
    steps: int = 0
    wall_s: float = 0.0
    stopped_by: str = "done"
    episode_indices: list[int] = field(default_factory=list)

    @property
    def fps(self) -> float:
        return self.steps / self.wall_s if self.wall_s > 0 else 0.0


class CollectionSession:
    """Runs teleop episodes and records them.

    Args:
        env: Gymnasium env (``reset(seed)``, ``step(a)``; ``info["success"]``).
        device: the operator (keyboard, SpaceMouse, gamepad, or an expert device).
        store: episode store opened for append.
        operator, task, language: per-episode metadata. An env whose observation carries
            ``language`` (an instruction drawn per episode, ``sim/instructed_env.py``) overrides
            ``language`` with it; the string is stored as metadata, not as a per-step array.
        realtime: pace steps at ``fps`` (human operators); False runs as fast as possible.
        fps: control rate [Hz] used for pacing.
        seed: the store's episode k is reset with ``seed + k`` (re-records reuse the seed; a
            session appending to a store continues where it ended).
        status: stream for the live status line (None: silent).
        on_step: called after every env step with the env (e.g. a viewer sync).
        clock, sleep: injectable for tests.
    """

    def __init__(
        self,
        env: Any,
        device: TeleopDevice,
        store: EpisodeStore,
        *,
        operator: str = "",
        task: str = "",
        language: str = "",
        realtime: bool = True,
        fps: float = 20.0,
        seed: int = 0,
        status: TextIO | None = sys.stderr,
        on_step: Callable[[Any], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        self.env, self.device, self.store = env, device, store
        self.meta = {"operator": operator, "task": task, "language": language}
        self.realtime, self.period, self.seed = realtime, 1.0 / fps, seed
        self.status, self.on_step = status, on_step
        self.clock, self.sleep = clock, sleep
        self.stats = SessionStats()
        self._start = self._last_status = clock()
        self._episodes = 0

    def run(self, episodes: int) -> SessionStats:
        """Record until ``episodes`` are committed, the operator quits or the device is lost."""
        if episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {episodes}")
        self._episodes = episodes
        start = self._start = self.clock()
        try:
            with self.device:
                first = self.seed + self.store.num_episodes  # appending continues the seeds
                while self.stats.recorded < episodes:
                    outcome = self._episode(first + self.stats.recorded, episodes)
                    if outcome == "quit":
                        self.stats.stopped_by = "quit"
                        break
        except KeyboardInterrupt:
            self.stats.stopped_by = "interrupt"
        except DeviceDisconnected as exc:
            self.stats.stopped_by = f"device lost: {exc}"
        finally:
            self.stats.wall_s = self.clock() - start
            self._print_status(episodes, 0, final=True)
        return self.stats

    def _episode(self, seed: int, episodes: int) -> str:
        """One episode; returns ``committed``, ``rerecord`` or ``quit``."""
        obs, info = self.env.reset(seed=seed)
        self.device.reset()
        meta = dict(self.meta)
        if LANGUAGE_KEY in obs:
            meta["language"] = str(obs[LANGUAGE_KEY])
        with self.store.begin_episode(  # discards on any exception
            operator=meta["operator"], task=meta["task"], language=meta["language"]
        ) as writer:
            t_next = self.clock()
            while True:
                if isinstance(self.device, ExpertDevice):
                    self.device.observe(obs)
                cmd = self.device.read()
                if "quit" in cmd.events or "rerecord" in cmd.events:
                    writer.discard()
                    self.stats.discarded += 1
                    return "quit" if "quit" in cmd.events else "rerecord"
                action = cmd.action
                next_obs, reward, terminated, truncated, info = self.env.step(action)
                step_info = {**info, "intervention": bool(cmd.intervene)}
                writer.add(_arrays(obs), action, step_info, reward=float(reward))
                self.stats.steps += 1
                obs = next_obs
                if self.on_step is not None:
                    self.on_step(self.env)
                if {"success", "failure"} & cmd.events:  # the operator's label ends it
                    return self._commit(writer, obs, "success" in cmd.events, False)
                if terminated or truncated:
                    return self._commit(writer, obs, bool(info.get("success")), terminated)
                self._print_status(episodes, len(writer))
                if self.realtime:
                    t_next += self.period
                    self.sleep(max(0.0, t_next - self.clock()))

    def _commit(self, writer: Any, final_obs: dict, success: bool, terminated: bool) -> str:
        index = writer.commit(success=success, terminated=terminated, final_obs=_arrays(final_obs))
        self.stats.recorded += 1
        self.stats.successes += int(success)
        self.stats.episode_indices.append(index)
        self._print_status(self._episodes, 0)
        return "committed"

    def _print_status(self, episodes: int, steps: int, final: bool = False) -> None:
        """A live status line: rewritten in place on a terminal (at most every STATUS_PERIOD
        seconds), one line per finished episode otherwise (logs stay readable)."""
        if self.status is None:
            return
        tty = self.status.isatty()
        now = self.clock()
        if not final:
            if tty and now - self._last_status < STATUS_PERIOD:
                return
            if not tty and steps != 0:
                return
        self._last_status = now
        s = self.stats
        line = (
            f"episode {min(s.recorded + 1, episodes)}/{episodes}  step {steps:4d}  "
            f"recorded {s.recorded}  success {s.successes}  discarded {s.discarded}  "
            f"{s.steps / max(now - self._start, 1e-9):6.1f} steps/s"
        )
        self.status.write(("\r" + line + ("\n" if final else "")) if tty else line + "\n")
        self.status.flush()


ROBOT_NAME = "panda_sim"
ACTION_SPACE = {
    "shape": [7],
    "low": -1.0,
    "high": 1.0,
    "doc": "TCP delta xyz (x max_dpos m), rotation-vector delta (x max_drot rad), base frame; "
    "gripper -1 open / +1 closed",
}


def open_or_create_store(
    path: str,
    *,
    fps: float,
    robot: str,
    obs_keys: Collection[str] | None = None,
    **attrs: Any,
) -> EpisodeStore:
    """Append to the store at ``path`` or create it. A store of another rate, robot or set of
    observation keys is refused before anything is recorded (ValueError)."""
    if Path(path).exists() and not Path(path).is_dir():
        raise ValueError(f"out={path} is a file; give a directory for the episode store")
    if Path(path).exists() and any(Path(path).iterdir()):
        store = EpisodeStore.open(path, mode="a")
        problem = ""
        if abs(store.fps - fps) > 1e-9 or store.attrs.get("robot") != robot:
            problem = (
                f"it holds {store.attrs.get('robot')} data at {store.fps} Hz; this session "
                f"records {robot} at {fps} Hz"
            )
        stored = {k for k in store.keys if k.startswith(("state/", "images/"))}
        if obs_keys is not None:
            obs_keys = [k for k in obs_keys if k != LANGUAGE_KEY]  # metadata, not an array
        if obs_keys is not None and stored and stored != set(obs_keys):
            problem = (
                f"its observations are {sorted(stored)}; this session records {sorted(obs_keys)}"
            )
        if problem:
            store.close()
            raise ValueError(f"cannot append to {path}: {problem}. Choose another out=")
        return store
    return EpisodeStore.create(path, fps=fps, robot=robot, attrs=attrs)

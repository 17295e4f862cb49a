"""Gymnasium env of a robot over ROS 2 topics: the API of ``sim/env.py`` on real (or sim) state.

Observations are the sim env's ``state/*`` keys (float32), built from the profile's state topics
by :class:`hardware.ros2.observation.StateCache` (newest sample of each topic, zero-order hold)
plus ``state/<key>`` task entries from the ``task_state`` topic when asked. Actions are the sim's
normalised (7,) delta-TCP + gripper actions.

Per ``step(a)`` (paced to ``control_hz`` by the clock, monotonic time unless injected):

1. if the :class:`~hardware.ros2.pose_commander.StateWatchdog` holds (state older than
   ``state_timeout_s``), the action is refused: nothing is sent, ``info["hold"]`` is True and
   ``info["hold_reason"]`` says why;
2. otherwise the action goes out: ``command="equilibrium_pose"`` passes it through the
   :class:`~hardware.ros2.pose_commander.PoseCommander` (safety filter last) here;
   ``command="action"`` publishes it on the ``action`` topic for a ``robotrl-bridge`` process,
   whose commander and watchdog then apply it (the bridge's filter is the last stage);
3. the env sleeps to the end of the control period and returns the newest state.

``reset(seed)`` publishes ``reset [seed]`` (a sim robot resets with that seed; on a real arm the
operator's reset routine answers) and waits for the ``episode`` message of that seed, then for
post-reset state. ``info["success"]`` and the reward come from the ``episode`` messages (the sim
robot's task oracle; without them success stays False: use a reward classifier on hardware).
No torch here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from controllers.commander import (
    DEFAULT_MAX_DPOS,
    DEFAULT_MAX_DROT,
    DEFAULT_WORKSPACE_HIGH,
    DEFAULT_WORKSPACE_LOW,
)
from hardware.ros2 import messages as m
from hardware.ros2.observation import ARM_KEYS, StateCache
from hardware.ros2.pose_commander import PoseCommander, ReflexFeatures, StateWatchdog
from hardware.ros2.topics import EPISODE_FIELDS, TopicProfile
from hardware.ros2.transport import LATCHED_QOS, SENSOR_QOS, Transport

LANGUAGE_KEY = "language"  # the instruction entry of an observation (str), as in sim
ARM_OBS_SIZES = {
    "joint_pos": 7,
    "joint_vel": 7,
    "ee_pos": 3,
    "ee_quat": 4,
    "ee_twist": 6,
    "wrench": 6,
    "gripper": 1,
}
COMMANDS = ("equilibrium_pose", "action")
LOCKSTEP_TIMEOUT_S = 10.0  # lockstep: a robot that does not answer a command within this holds
INSTRUCTION_WAIT_S = 0.5  # [s] a reset waits this long for an instruction sent with it
MAX_INSTRUCTION_CHARS = 256


class RobotEnvError(RuntimeError):
    """The robot did not answer (no reset acknowledgement, no state) within the bound."""


class RosRobotEnv(gym.Env):
    """A robot over ROS 2 with the Gymnasium API of :class:`sim.env.PandaEnv`.

    Args:
        transport: a :class:`hardware.ros2.transport.Transport`.
        profile: the robot's topics.
        control_hz: step rate [Hz] (the rate the policy was trained at).
        command: ``"equilibrium_pose"`` (filter + commands here) or ``"action"`` (a bridge
            node filters and commands).
        max_dpos, max_drot: action scale per unit and step [m, rad].
        workspace_low, workspace_high: (3,) TCP box of the safety filter [m, base frame].
        stiffness: (6,) Cartesian stiffness sent once on ``impedance_params``; None: robot's.
        grasp_release_z: TCP height [m] above which a held object stays gripped (the
            commander's grasp hold, :mod:`controllers.grasp_hold`); 0: off.
        safety_critic: exported risk critic (``.npz``, robot features) of the safety reflex
            that checks every command at the measured features before it is sent
            (``info["safety"]`` reports it); empty: no reflex. Needs ``command="equilibrium_pose"``
            (through a bridge, the bridge's reflex acts).
        safety_threshold: eps_safe of the reflex (None: the export's).
        state_timeout_s: watchdog bound [s].
        max_episode_steps: truncation horizon.
        task_sizes: task observation entries (``{"cube_pos": 3}``) read from ``task_state``.
        cameras: camera names (``images/<name>`` from the profile's Image topics).
        terminate_on_success: end the episode when the ``episode`` message reports success.
        reset_timeout_s: how long a reset waits for the robot's acknowledgement [s].
        lockstep: the robot is a sim robot stepping once per command (``lockstep_on:
            equilibrium_pose``): a step waits for its answer (the ``episode`` message and the
            state of that stamp) instead of the wall clock, and the watchdog bound becomes
            :data:`LOCKSTEP_TIMEOUT_S` (state only changes when commanded).
        instruction: the observation carries ``language`` (str), for language-conditioned
            policies: this instruction until one arrives on the profile's ``instruction`` topic
            (the newest wins; a sim robot publishes its episode's at every reset). None: no
            ``language`` entry.
        clock_ns: monotonic clock [ns] for pacing, state ages, the watchdog and every timeout.
        sleep: waits that many seconds (pacing and polling); goes with ``clock_ns``.
    """

    metadata = {"render_modes": []}  # noqa: RUF012 - gym API
    observation_space: gym.spaces.Dict  # one entry per observation key

    def __init__(
        self,
        transport: Transport,
        profile: TopicProfile,
        *,
        control_hz: float = 20.0,
        command: str = "equilibrium_pose",
        max_dpos: float = DEFAULT_MAX_DPOS,
        max_drot: float = DEFAULT_MAX_DROT,
        workspace_low: Sequence[float] = DEFAULT_WORKSPACE_LOW,
        workspace_high: Sequence[float] = DEFAULT_WORKSPACE_HIGH,
        stiffness: Sequence[float] | None = None,
        grasp_release_z: float = 0.0,
        safety_critic: str | None = None,
        safety_threshold: float | None = None,
        state_timeout_s: float = 0.05,
        max_episode_steps: int = 200,
        task_sizes: dict[str, int] | None = None,
        cameras: Sequence[str] = (),
        image_size: tuple[int, int] = (96, 96),
        terminate_on_success: bool = True,
        reset_timeout_s: float = 30.0,
        lockstep: bool = False,
        instruction: str | None = None,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        if command not in COMMANDS:
            raise ValueError(f"command must be one of {COMMANDS}, got {command!r}")
        if not (control_hz > 0 and state_timeout_s > 0 and max_episode_steps > 0):
            raise ValueError(
                "expected control_hz, state_timeout_s, max_episode_steps > 0, got "
                f"{control_hz}, {state_timeout_s}, {max_episode_steps}"
            )
        self.profile = profile
        self.control_hz = float(control_hz)
        self.period = 1.0 / self.control_hz
        self.command = command
        self.max_episode_steps = int(max_episode_steps)
        self.terminate_on_success = terminate_on_success
        self.reset_timeout_s = float(reset_timeout_s)
        self.lockstep = lockstep
        self.task_sizes = dict(task_sizes or {})
        self._clock_ns = clock_ns
        self._sleep = sleep
        self.cache = StateCache(
            profile, task_state=bool(self.task_sizes), cameras=cameras, clock_ns=clock_ns
        )
        self._subs = self.cache.subscribe(transport, SENSOR_QOS)
        self.commander: PoseCommander | None = None
        self._features = ReflexFeatures()  # the reflex's, of the measured state
        self._action_pub: Any = None
        if command == "equilibrium_pose":
            self.commander = PoseCommander(
                transport,
                profile,
                max_dpos=max_dpos,
                max_drot=max_drot,
                workspace_low=workspace_low,
                workspace_high=workspace_high,
                stiffness=stiffness,
                grasp_release_z=grasp_release_z,
                safety_critic=safety_critic or None,
                safety_threshold=safety_threshold,
            )
        elif safety_critic:
            raise ValueError("safety_critic needs command='equilibrium_pose' (else: the bridge's)")
        else:
            self._action_pub = transport.publisher(profile.action, m.Float64MultiArray)
        self.watchdog = StateWatchdog(
            self.cache,
            LOCKSTEP_TIMEOUT_S if lockstep else state_timeout_s,
            on_hold=self._on_hold,
            on_resume=self._on_resume,
            status=transport if command == "equilibrium_pose" else None,
            clock=self._now,
        )
        self._reset_pub = transport.publisher(profile.reset, m.Float64MultiArray)
        self._episode_lock = threading.Condition()
        self._episode: dict[str, float] | None = None
        self._episode_received = 0.0
        self._subs.append(
            transport.subscribe(profile.episode, m.Float64MultiArray, self._on_episode)
        )
        self.instruction = instruction
        self._instruction_received = -1.0
        # not in _subs: a reset does not wait for an instruction publisher (an operator may
        # have set the instruction as a parameter)
        self._instruction_sub = (
            transport.subscribe(profile.instruction, m.String, self._on_instruction, LATCHED_QOS)
            if instruction is not None
            else None
        )
        self._seed = -1
        self._steps = 0
        self._next_tick = 0.0
        self._last_obs: dict[str, np.ndarray] | None = None
        self._matched_once = False

        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(7,), dtype=np.float32)
        sizes = {**ARM_OBS_SIZES, **self.task_sizes}
        if not profile.ee_twist:
            sizes.pop("ee_twist")  # franka_ros2 publishes no measured twist
        spaces: dict[str, gym.Space] = {
            f"state/{k}": gym.spaces.Box(-np.inf, np.inf, shape=(n,), dtype=np.float32)
            for k, n in sizes.items()
        }
        for cam in cameras:
            spaces[f"images/{cam}"] = gym.spaces.Box(0, 255, (*image_size, 3), dtype=np.uint8)
        self._state_keys = list(spaces)
        if instruction is not None:
            spaces[LANGUAGE_KEY] = gym.spaces.Text(MAX_INSTRUCTION_CHARS)
        self.observation_space = gym.spaces.Dict(spaces)
        self.holds = 0  # steps refused by the watchdog
        self.refused_last = False

    def _now(self) -> float:
        """The injected monotonic clock [s]."""
        return self._clock_ns() / 1e9

    # ------------------------------------------------------------------ callbacks
    def _on_episode(self, msg: m.Float64MultiArray) -> None:
        if len(msg.data) != len(EPISODE_FIELDS):
            return
        with self._episode_lock:
            self._episode = dict(zip(EPISODE_FIELDS, msg.data, strict=True))
            self._episode_received = self._now()
            self._episode_lock.notify_all()

    def _on_instruction(self, msg: m.String) -> None:
        with self._episode_lock:
            self.instruction = str(msg.data)[:MAX_INSTRUCTION_CHARS]
            self._instruction_received = self._now()
            self._episode_lock.notify_all()

    def _with_instruction(self, obs: dict[str, Any]) -> dict[str, Any]:
        if self.instruction is not None:
            obs[LANGUAGE_KEY] = self.instruction
        return obs

    def _on_hold(self, reason: str) -> None:
        # lockstep: a re-sent target would step the sim robot once more (learner pauses)
        if self.commander is not None and not self.lockstep:
            self.commander.hold()

    def _on_resume(self) -> None:
        if self.commander is not None:
            self.commander.resync()

    # ------------------------------------------------------------------ state
    def _fresh_obs(self) -> dict[str, np.ndarray] | None:
        latest = self.cache.latest()
        if latest is None:
            return None
        obs, _age = latest
        return {k: obs[k] for k in self._state_keys if k in obs}

    def _wait_state(self, after: float) -> dict[str, np.ndarray]:
        """Newest state once every topic has a sample received after ``after`` (monotonic)."""
        deadline = self._now() + self.reset_timeout_s
        while self._now() < deadline:
            ages = self.cache.ages()
            now = self._now()
            if all(a is not None and now - a > after for a in ages.values()):
                obs = self._fresh_obs()
                if obs is not None and len(obs) == len(self._state_keys):
                    return obs
            self._sleep(0.002)
        raise RobotEnvError(
            f"no fresh state within {self.reset_timeout_s} s: {self.watchdog.check() or 'ok'};"
            f" missing observation keys: {self._missing_keys()}"
        )

    def _missing_keys(self) -> list[str]:
        latest = self.cache.latest()
        have = set(latest[0]) if latest else set()
        return sorted(set(self._state_keys) - have)

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self._seed = int(seed) if seed is not None else int(self.np_random.integers(2**31))
        deadline = self._now() + self.reset_timeout_s
        # every state topic and the episode topic matched first: what a lockstep robot publishes
        # once per reset must not go out before discovery has connected us
        # (with a bridge: its action reader too; its state readers come up with it)
        while self._now() < deadline and (
            self._reset_pub.matched_count() == 0
            or any(s.matched_count() == 0 for s in self._subs)
            or (self._action_pub is not None and self._action_pub.matched_count() == 0)
        ):
            self._sleep(0.01)
        if self._action_pub is not None and self._action_pub.matched_count() == 0:
            raise RobotEnvError(
                f"nobody subscribes to {self.profile.action} within {self.reset_timeout_s} s: "
                "start robotrl-bridge (or use command='equilibrium_pose')"
            )
        if not self._matched_once:  # let the other direction of discovery settle, once
            self._matched_once = True
            self._sleep(0.2)
        deadline = self._now() + self.reset_timeout_s
        acked, obs = False, None
        started = self._now()
        while obs is None and self._now() < deadline:
            if self._reset_pub.matched_count() == 0:  # nobody listens (yet): wait
                self._sleep(0.01)
                continue
            sent = self._now()
            self._reset_pub.publish(m.Float64MultiArray(data=[float(self._seed)]))

            def answered(s: float = sent) -> bool:
                return (
                    self._episode_received >= s  # an answer in the same instant counts
                    and self._episode is not None
                    and int(self._episode["seed"]) == self._seed
                )

            with self._episode_lock:
                acked = self._episode_lock.wait_for(
                    answered,
                    timeout=min(1.0, max(0.0, deadline - self._now())),
                )
                stamp = _episode_stamp(self._episode or {})
            if not acked:
                continue
            if self.lockstep:  # the state of the reset stamp, else reset again (same seed)
                found = self.cache.wait_at(stamp, min(1.0, max(0.0, deadline - self._now())))
                if found is not None:
                    obs = {k: found[k] for k in self._state_keys if k in found}
            else:
                obs = self._wait_state(after=self._now())
        if obs is None:
            raise RobotEnvError(
                f"no {'state' if acked else 'episode message'} for the reset of seed {self._seed}"
                f" ({self.profile.reset} -> {self.profile.episode}) within "
                f"{self.reset_timeout_s} s: is the robot running?"
            )
        if self.instruction is not None:
            self._await_instruction(since=started)
        if self.commander is not None:
            self.commander.resync()
        self._features.reset()
        self._steps = 0
        self._next_tick = self._now() + self.period
        self._last_obs = obs
        return self._with_instruction(obs), {"success": False, "intervention": False}

    def _await_instruction(self, since: float) -> None:
        """After a reset's acknowledgement: the instruction a publisher sends with the reset
        (the sim robot's, up to :data:`INSTRUCTION_WAIT_S`), else the one held; none at all is
        an error (a language-conditioned policy cannot act without one)."""
        sub = self._instruction_sub
        publishing = sub is not None and sub.matched_count() > 0
        with self._episode_lock:
            if publishing:
                self._episode_lock.wait_for(
                    lambda: self._instruction_received >= since, timeout=INSTRUCTION_WAIT_S
                )
            if not self.instruction:
                raise RobotEnvError(
                    "a language-conditioned policy needs an instruction: set the instruction "
                    f"parameter or publish one on {self.profile.instruction}"
                )

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        a = np.asarray(action, dtype=float).reshape(-1)
        if a.shape != (7,):
            raise ValueError(f"action must have shape (7,), got {np.shape(action)}")
        flags: dict[str, Any] = {}
        # synchronous check: the watchdog thread may not have run since the state came back
        reason = self.watchdog.check()
        if not reason and self.watchdog.held and self.commander is not None:
            self.commander.resync()
        refused = bool(reason)
        sent = self._now()
        if not refused:
            obs_now = self._fresh_obs()
            if obs_now is None:
                refused, reason = True, "no state"
            elif self.commander is not None:
                grip = obs_now.get("state/gripper")
                opening = float(grip[0]) if grip is not None else None
                ee_pos, ee_quat = obs_now["state/ee_pos"], obs_now["state/ee_quat"]
                features = None
                if self.commander.reflex is not None:
                    features = self._features(obs_now, self.cache.newest_stamp())
                flags = self.commander.apply(a, ee_pos, ee_quat, opening, features)
            else:
                self._action_pub.publish(m.Float64MultiArray(data=[float(x) for x in a]))
        if refused:
            self.holds += 1
        self.refused_last = refused
        if self.lockstep and not refused:
            obs = self._lockstep_answer(sent)
            if obs is None:
                refused, reason = (
                    True,
                    f"no answer from the lockstep robot in {LOCKSTEP_TIMEOUT_S} s",
                )
                self.holds += 1
        else:
            # pace to the control rate; a step more than a period late restarts the schedule
            # (its successor gets a full period, no burst of catch-up steps)
            delay = self._next_tick - self._now()
            if delay > 0:
                self._sleep(delay)
            now = self._now()
            self._next_tick += self.period
            if self._next_tick <= now:
                self._next_tick = now + self.period
            obs = self._fresh_obs()
        if obs is None or len(obs) != len(self._state_keys):
            obs = self._last_obs if self._last_obs is not None else {}
        self._last_obs = obs
        obs = self._with_instruction(obs)
        self._steps += 1
        with self._episode_lock:
            ep = dict(self._episode) if self._episode is not None else None
        success = bool(ep is not None and int(ep["seed"]) == self._seed and ep["success"])
        reward = float(ep["reward"]) if ep is not None and int(ep["seed"]) == self._seed else 0.0
        terminated = bool(success and self.terminate_on_success)
        truncated = self._steps >= self.max_episode_steps
        info = {
            "success": success,
            "intervention": False,
            "safety": flags,
            "hold": refused,
            "hold_reason": reason,
        }
        return obs, reward, terminated, truncated, info

    def _lockstep_answer(self, sent: float) -> dict[str, np.ndarray] | None:
        """The state the lockstep robot published for the command sent at ``sent``."""
        with self._episode_lock:
            if not self._episode_lock.wait_for(
                lambda: self._episode_received >= sent, timeout=LOCKSTEP_TIMEOUT_S
            ):
                return None
            stamp = _episode_stamp(self._episode or {})
        found = self.cache.wait_at(stamp, LOCKSTEP_TIMEOUT_S)
        if found is None:
            return None
        return {k: found[k] for k in self._state_keys if k in found}

    def close(self) -> None:
        self.watchdog.close()
        if self._instruction_sub is not None:
            self._instruction_sub.close()
        for sub in self._subs:
            sub.close()


def _episode_stamp(ep: dict[str, float]) -> int:
    return int(ep.get("stamp_sec", -1)) * 1_000_000_000 + int(ep.get("stamp_nanosec", 0))


__all__ = ["ARM_KEYS", "ARM_OBS_SIZES", "RobotEnvError", "RosRobotEnv"]

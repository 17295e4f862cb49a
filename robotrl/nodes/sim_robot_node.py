"""``robotrl-sim-robot``: the MuJoCo Panda served over the robot's ROS 2 topics.

It speaks a topic profile (``sim`` = franka_ros2 names, see ``hardware/ros2/topics.py``), so the
bridge, policy, teleop and recorder nodes run against it exactly as against the arm.

Real time (default, ``lockstep: false``): physics advances with the wall clock (500 Hz ticks;
a late loop catches up to :data:`MAX_CATCH_UP_S`, further delay is counted in ``late_ticks``),
the Cartesian impedance controller tracks the newest ``equilibrium_pose`` (PoseStamped, TCP in
base frame), the fingers the newest ``gripper_command`` (``[width m]``, total opening) and
``impedance_params`` (6 stiffnesses [N/m x3, Nm/rad x3], optional 6 damping ratios, ignored)
set the gains. State goes out at ``state_hz`` stamped with the wall clock: ``joint_states``
(arm + fingers), gripper joint states, EE pose, external wrench, EE twist and the task state (a
stand-in for perception); the configured ``cameras`` render at ``camera_hz`` onto the
profile's camera topics (rgb8 Image, ``image_size``). A ``reset`` ``[seed]`` message resets the
episode with that seed (a human or a reset routine on a real arm) and holds the arm at the new
TCP pose until the next command. Every control period (``control_hz``) the node publishes the
``episode`` message (seed, periods since reset, the task's reward and success, the truncation
flag at the task's horizon): the task oracle a real robot does not have. A language-conditioned
task (``tabletop``) draws an instruction at every reset and publishes it on ``instruction``
(latched) before the reset state.

Lockstep (``lockstep: true``): the env is stepped once per normalised ``action`` message (as
``sim/env.py`` steps it, safety filter included; ``lockstep_on: action``) or once per
``equilibrium_pose`` (one control period of physics tracking it, after the newest gripper
command; ``lockstep_on: equilibrium_pose``, what the bridge sends), and its state and
``episode`` are published right after (camera images with the state, same stamp), stamped
``n / control_hz`` (deterministic: machine load
cannot change the result; for data collection, tests and the end-to-end check).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import sim
from controllers.rotations import quat_to_mat
from hardware.ros2 import messages as m
from hardware.ros2.config import SimRobotConfig
from hardware.ros2.node_process import run_node_process
from hardware.ros2.observation import image_message, state_messages
from hardware.ros2.transport import DEFAULT_QOS, LATCHED_QOS, Transport

log = logging.getLogger(__name__)

MAX_CATCH_UP_S = 0.1  # real time: physics a late loop runs at once before falling behind [s]


@dataclass
class SimRobotStats:
    """What the node did (printed as JSON on exit)."""

    resets: int = 0
    commands: int = 0
    state_msgs: int = 0
    image_msgs: int = 0
    physics_ticks: int = 0
    late_ticks: int = 0
    stopped_by: str = ""


class SimRobotNode:
    """The sim robot on ``transport`` (see the module docstring).

    Args:
        cfg: node configuration (task, controller, rates, lockstep).
        transport: a :class:`hardware.ros2.transport.Transport`.
        max_episode_steps: truncation horizon of the ``episode`` message; default the task's.
        clock_ns: the real-time loop's monotonic clock [ns] (message stamps stay wall time).
        wait: waits up to the given seconds in the real-time loop (default: until ``stop()``).
    """

    def __init__(
        self,
        cfg: SimRobotConfig,
        transport: Transport,
        max_episode_steps: int | None = None,
        *,
        clock_ns: Callable[[], int] | None = None,
        wait: Callable[[float], object] | None = None,
    ) -> None:
        self.cfg = cfg
        self.profile = cfg.topic_profile()
        self.env = sim.make(
            cfg.task,
            controller=cfg.controller,
            control_hz=cfg.control_hz,
            max_dpos=cfg.max_dpos,
            max_drot=cfg.max_drot,
            max_episode_steps=max_episode_steps,
            image_size=tuple(cfg.image_size),  # cameras render on their own schedule
        )
        self.task_keys = list(self.env.task.observation_sizes())
        self.profile_cameras = self.profile.camera_topics
        unknown = [c for c in cfg.cameras if c not in self.profile_cameras]
        if unknown:
            raise ValueError(
                f"cameras {unknown} have no topic in profile {self.profile.name!r} "
                f"(it has {sorted(self.profile_cameras)})"
            )
        self.cameras = tuple(cfg.cameras)
        self._image_pubs = {c: transport.publisher(self.profile_cameras[c], m.Image)
                            for c in self.cameras}  # fmt: skip
        missing = [c for c in self.cameras if not self.env.has_camera(c)]
        if missing:  # rendering itself waits for the serving thread (GL contexts are per thread)
            raise ValueError(f"task {cfg.task!r} has no camera {missing}")
        self._instruction = (
            transport.publisher(self.profile.instruction, m.String, LATCHED_QOS)
            if hasattr(self.env, "instruction")
            else None
        )
        self.stats = SimRobotStats()
        self._transport = transport
        self._pubs: dict[str, Any] = {}
        self._episode = transport.publisher(self.profile.episode, m.Float64MultiArray)
        # every state writer exists from the start, so readers match before the first reset (a
        # lockstep robot publishes the reset state once)
        obs, _ = self.env.reset(seed=cfg.seed)
        for topic, msg in state_messages(obs, 0, self.profile, task_keys=self.task_keys).items():
            self._pubs[topic] = transport.publisher(topic, type(msg))
        self._stop = threading.Event()
        self._served = threading.Event()  # set while run() is not running
        self._served.set()
        self._clock_ns = clock_ns or time.monotonic_ns
        self._wait = wait or self._stop.wait
        self._lock = threading.Lock()
        self._inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._seed = cfg.seed
        self._step = 0
        self._n = 0  # lockstep: published steps
        p = self.profile
        transport.subscribe(p.reset, m.Float64MultiArray, lambda msg: self._inbox.put(("r", msg)))
        self._target: tuple[np.ndarray, np.ndarray] | None = None
        self._width: float | None = None
        self._stiffness: np.ndarray | None = None
        if cfg.lockstep and cfg.lockstep_on == "action":
            transport.subscribe(
                p.action, m.Float64MultiArray, lambda msg: self._inbox.put(("a", msg))
            )
        else:
            if not p.equilibrium_pose:
                raise ValueError(f"profile {p.name!r} has no equilibrium_pose topic")
            on_pose = (lambda msg: self._inbox.put(("p", msg))) if cfg.lockstep else self._on_pose
            transport.subscribe(p.equilibrium_pose, m.PoseStamped, on_pose, DEFAULT_QOS)
            if p.gripper_command:
                transport.subscribe(p.gripper_command, m.Float64MultiArray, self._on_gripper)
            if p.impedance_params:
                transport.subscribe(
                    p.impedance_params, m.Float64MultiArray, self._on_impedance, LATCHED_QOS
                )

    # ------------------------------------------------------------------ command callbacks
    @staticmethod
    def _parse_pose(msg: m.PoseStamped) -> tuple[np.ndarray, np.ndarray] | None:
        p, q = msg.pose.position, msg.pose.orientation
        pos = np.array([p.x, p.y, p.z])
        quat = np.array([q.w, q.x, q.y, q.z])
        norm = float(np.linalg.norm(quat))
        if not (np.isfinite(pos).all() and np.isfinite(quat).all() and norm > 0.5):
            log.warning("ignoring a non-finite or non-unit equilibrium pose")
            return None
        return pos, quat_to_mat(quat / norm)

    def _on_pose(self, msg: m.PoseStamped) -> None:
        target = self._parse_pose(msg)
        if target is not None:
            with self._lock:
                self._target = target
                self.stats.commands += 1

    def _on_gripper(self, msg: m.Float64MultiArray) -> None:
        if len(msg.data) >= 1 and np.isfinite(msg.data[0]):
            with self._lock:
                self._width = float(msg.data[0])

    def _on_impedance(self, msg: m.Float64MultiArray) -> None:
        k = np.asarray(msg.data[:6], dtype=float)
        if k.shape == (6,) and np.isfinite(k).all() and (k > 0).all():
            with self._lock:
                self._stiffness = k

    # ------------------------------------------------------------------ publishing
    def _publish_state(self, obs: dict[str, np.ndarray], t_ns: int, images: bool = True) -> None:
        """The state of ``obs`` stamped ``t_ns``, and (``images``) every camera's image of
        the current scene with the same stamp."""
        if images:
            self._publish_images(t_ns)
        for topic, msg in state_messages(obs, t_ns, self.profile, task_keys=self.task_keys).items():
            if topic not in self._pubs:
                self._pubs[topic] = self._transport.publisher(topic, type(msg))
            self._pubs[topic].publish(msg)
        self.stats.state_msgs += 1

    def _publish_images(self, t_ns: int) -> None:
        for cam, pub in self._image_pubs.items():
            pub.publish(image_message(self.env.render_camera(cam), t_ns, frame_id=cam))
        self.stats.image_msgs += len(self._image_pubs)

    def _publish_episode(
        self, t_ns: int, reward: float, success: bool, term: bool, trunc: bool
    ) -> None:
        sec, nsec = divmod(t_ns, 1_000_000_000)
        data = [self._seed, self._step, reward, success, term, trunc, sec, nsec]
        self._episode.publish(m.Float64MultiArray(data=[float(x) for x in data]))

    def _reset(self, seed: int, t_ns: int) -> dict[str, np.ndarray]:
        self._seed, self._step = seed, 0
        with self._lock:  # commands of the last episode do not carry over
            self._target, self._width, self._stiffness = None, None, None
        obs, _ = self.env.reset(seed=seed)
        self.stats.resets += 1
        if self._instruction is not None:
            self._instruction.publish(m.String(data=str(getattr(self.env, "instruction", ""))))
        self._publish_state(obs, t_ns)
        self._publish_episode(t_ns, 0.0, False, False, False)
        return obs

    # ------------------------------------------------------------------ loops
    def stop(self) -> None:
        """Ask :meth:`run` to return."""
        self._stop.set()
        self._inbox.put(("stop", None))

    def run(self, duration_s: float | None = None) -> SimRobotStats:
        """Serve until :meth:`stop` (or ``duration_s``)."""
        self._served.clear()
        try:
            if self.cfg.lockstep:
                self._run_lockstep(duration_s)
            else:
                self._run_realtime(duration_s)
        finally:
            self.env.close()  # the cameras' GL contexts, on the thread that made them
            self._served.set()
        self.stats.stopped_by = self.stats.stopped_by or "stopped"
        return self.stats

    def _run_lockstep(self, duration_s: float | None) -> None:
        period_ns = round(1e9 / self.cfg.control_hz)
        end = None if duration_s is None else time.monotonic() + duration_s
        while not self._stop.is_set():
            try:
                kind, msg = self._inbox.get(timeout=0.1)
            except queue.Empty:
                if end is not None and time.monotonic() > end:
                    return
                continue
            if kind == "stop":
                return
            self._n += 1
            t = self._n * period_ns
            if kind == "r":
                self._reset(int(msg.data[0]), t)
                continue
            if kind == "a":
                obs, reward, term, trunc, info = self.env.step(np.asarray(msg.data, dtype=float))
                success = bool(info["success"])
            else:  # one control period of physics tracking the commanded pose
                obs, reward, success, term, trunc = self._pose_step(msg)
            self._step += 1
            self._publish_state(obs, t)
            self._publish_episode(t, float(reward), success, term, trunc)

    def _pose_step(
        self, msg: m.PoseStamped
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, bool]:
        """Lockstep on ``equilibrium_pose``: what ``PandaEnv.step`` does after its own filter."""
        env = self.env
        target = self._parse_pose(msg)
        with self._lock:
            width, stiffness, self._stiffness = self._width, self._stiffness, None
        if target is not None:
            env.track(*target)
            self.stats.commands += 1
        if width is not None:
            env.set_gripper_width(width)
        if stiffness is not None:
            env.controller.set_stiffness(stiffness)
        self._advance(env.n_substeps)
        success = bool(env.task.success(env.data))
        if env.reward_type == "sparse":
            reward = float(success)
        else:
            reward = float(env.task.dense_reward(env.data, env.state.ee_pos))
        term = bool(success and env.terminate_on_success)
        trunc = self._step + 1 >= env.max_episode_steps
        return env.observe(), reward, success, term, trunc

    def _advance(self, ticks: int) -> None:
        self.env.advance(ticks)
        self.stats.physics_ticks += ticks

    def _now(self) -> float:
        return self._clock_ns() * 1e-9

    def _run_realtime(self, duration_s: float | None) -> None:
        env, cfg = self.env, self.cfg
        dt = float(env.model.opt.timestep)
        self._max_catch_up = max(1, round(MAX_CATCH_UP_S / dt))
        state_period = 1.0 / cfg.state_hz
        control_period = 1.0 / cfg.control_hz
        camera_period = 1.0 / cfg.camera_hz
        self._reset(cfg.seed, time.time_ns())
        t_phys = self._now()  # wall time the physics has reached
        next_state = next_camera = t_phys
        next_control = t_phys + control_period  # step 1 a full period after the reset
        end = None if duration_s is None else t_phys + duration_s
        hold = (env.state.ee_pos.copy(), env.state.ee_rot.copy())
        env.track(*hold)
        while not self._stop.is_set():
            now = self._now()
            if end is not None and now > end:
                return
            try:
                while True:
                    kind, msg = self._inbox.get_nowait()
                    if kind == "r":
                        with self._lock:
                            self._target, self._width = None, None
                        self._reset(int(msg.data[0]), time.time_ns())
                        hold = (env.state.ee_pos.copy(), env.state.ee_rot.copy())
                        env.track(*hold)
                        t_phys = next_state = self._now()
                        next_control = t_phys + control_period
            except queue.Empty:
                pass
            with self._lock:
                target, width, stiffness = self._target, self._width, self._stiffness
                self._stiffness = None
            if target is not None:
                env.track(*target)
            if width is not None:
                env.set_gripper_width(width)
            if stiffness is not None:
                env.controller.set_stiffness(stiffness)
            ticks = int((now - t_phys) / dt)
            if ticks > 0:
                # a starved loop catches up (a real arm does not pause either), up to
                # MAX_CATCH_UP_S; beyond that the physics falls behind the wall clock
                if ticks > self._max_catch_up:
                    self.stats.late_ticks += ticks - self._max_catch_up
                    t_phys += (ticks - self._max_catch_up) * dt
                    ticks = self._max_catch_up
                self._advance(ticks)
                t_phys += ticks * dt
            if self.cameras and now >= next_camera:
                next_camera = max(next_camera + camera_period, now)
                self._publish_images(time.time_ns())
            if now >= next_state:
                next_state = max(next_state + state_period, now)
                self._publish_state(env.observe(), time.time_ns(), images=False)
            if now >= next_control:
                next_control = max(next_control + control_period, now)
                self._step += 1
                success = bool(env.task.success(env.data))
                reward = float(success)
                trunc = self._step >= env.max_episode_steps
                self._publish_episode(time.time_ns(), reward, success, success, trunc)
            wake = min(next_state, next_control, t_phys + dt)
            if self.cameras:
                wake = min(wake, next_camera)
            self._wait(max(0.0, wake - self._now()))

    def close(self) -> None:
        """Stop serving; once :meth:`run` has returned (up to 10 s), release the env."""
        self.stop()
        if self._served.wait(timeout=10.0):
            self.env.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``robotrl-sim-robot`` (ROS 2 style arguments: ``--ros-args -p key:=v``)."""
    return run_node_process(SimRobotConfig, SimRobotNode, argv)


if __name__ == "__main__":
    raise SystemExit(main())

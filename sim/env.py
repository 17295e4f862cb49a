"""Gymnasium env of the simulated Panda: delta end-effector actions through the safety filter
and an impedance controller running at the physics rate.

Shapes: the action is (7,) in [-1, 1]: xyz delta (scaled by ``max_dpos`` [m] per step, base
frame), rotation-vector delta (scaled by ``max_drot`` [rad], base frame), gripper (-1 open,
+1 closed). Observations are a dict of float32 ``state/*`` arrays and, when cameras are
requested, uint8 ``images/<camera>`` arrays (H, W, 3).

Per control step (``control_hz``, default 20 Hz) the env integrates the action into a target
pose, passes it through :class:`controllers.safety_filter.SafetyFilter` (workspace box, step
limit, NaN -> hold), then runs ``physics_hz / control_hz`` physics ticks. With
``controller="impedance"`` (or ``"osc"``) each tick reads the arm state, computes torques with
the numpy controller the hardware path uses and passes them through the filter's torque stage;
``controller="native"`` runs the same law inside MuJoCo (``sim/native_impedance.py``), which
is several times faster and agrees with the numpy law within the bound its test states.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from controllers import panda
from controllers.arm_state import ArmState
from controllers.commander import (
    DEFAULT_MAX_DPOS,
    DEFAULT_MAX_DROT,
    Commander,
)
from controllers.impedance import CartesianImpedance
from controllers.operational_space import OperationalSpace
from controllers.rotations import mat_to_quat
from controllers.tick import TorqueLoop
from sim.arm import PHYSICS_DT, scene_xml
from sim.arm_reader import MjArmReader
from sim.native_impedance import NativeCartesianImpedance
from sim.safety_guard import SafetyGuard
from sim.task import Task

CONTROLLERS = ("impedance", "osc", "native")
# Task-level gains of the sim (the controller's own defaults are the conservative hardware ones).
# 2000 N/m with a 2 cm error clip (a 40 N force bound) lets the TCP follow a full 2 cm / 50 ms
# command (K/D = sqrt(K)/2 ~ 22 /s); the serl Franka controllers use the same stiffness.
SIM_CONTROLLER_DEFAULTS: dict[str, Any] = {
    "stiffness": np.array([2000.0, 2000.0, 2000.0, 150.0, 150.0, 150.0]),
    "error_clip": np.array([0.02, 0.02, 0.02, 0.15, 0.15, 0.15]),
    "effective_mass": np.array([1.0, 1.0, 1.0, 0.2, 0.2, 0.2]),
}
DOWN = np.diag([1.0, -1.0, -1.0])  # TCP orientation at home: z pointing at the table


# scene features observation images go without (each costs several times the frame on a CPU
# renderer; sim.env.PandaEnv.render_camera)
OBS_RENDER_OFF = (
    mujoco.mjtRndFlag.mjRND_SHADOW,
    mujoco.mjtRndFlag.mjRND_REFLECTION,
    mujoco.mjtRndFlag.mjRND_SKYBOX,
)


class PandaEnv(gym.Env):
    """One Panda arm, one task.

    Args:
        task: the task (objects, success, reward).
        control_hz: policy/action rate [Hz].
        controller: ``"impedance"`` (numpy Cartesian impedance), ``"osc"`` (numpy operational
            space) or ``"native"`` (the impedance law inside MuJoCo).
        stiffness: (6,) Cartesian stiffness [N/m x3, Nm/rad x3]; None for the env default.
        controller_kwargs: extra keyword arguments of the controller (error_clip, ...).
        max_dpos: translation per action unit and step [m].
        max_drot: rotation per action unit and step [rad].
        reward_type: ``"sparse"`` (1 on success) or ``"dense"`` (task shaping in [0, 1]).
        terminate_on_success: end the episode when the task succeeds.
        cameras: camera names to render into the observation (``front``, ``wrist``).
        image_size: (H, W) of rendered images.
        randomize: override the task's domain randomisation knobs (field -> value).
        workspace_low, workspace_high: (3,) TCP box for the safety filter [m, base frame].
        max_episode_steps: truncation horizon; default from the task.
        render_mode: ``"rgb_array"`` for :meth:`render`.
        safety: ``"filter"`` (the deterministic filter only), ``"monitor"`` (+ constraint costs
            every physics tick in ``info["safety"]``) or ``"reflex"`` (+ the safety-reflex
            critic); see :mod:`sim.safety_guard`.
        safety_kwargs: keyword arguments of :class:`sim.safety_guard.SafetyGuard` (``critic``
            path, ``threshold``, ``reflex_hz``, ``force_limit``, ``task_keys``, ...).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}  # noqa: RUF012 - gym API
    observation_space: gym.spaces.Dict  # one entry per observation key

    def __init__(
        self,
        task: Task,
        *,
        control_hz: float = 20.0,
        controller: str = "native",
        stiffness: np.ndarray | None = None,
        controller_kwargs: dict[str, Any] | None = None,
        max_dpos: float = DEFAULT_MAX_DPOS,
        max_drot: float = DEFAULT_MAX_DROT,
        reward_type: str = "sparse",
        terminate_on_success: bool = True,
        cameras: tuple[str, ...] = (),
        image_size: tuple[int, int] = (96, 96),
        randomize: dict[str, float] | None = None,
        workspace_low: np.ndarray | None = None,
        workspace_high: np.ndarray | None = None,
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
        safety: str = "filter",
        safety_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if controller not in CONTROLLERS:
            raise ValueError(f"controller must be one of {CONTROLLERS}, got {controller!r}")
        if reward_type not in ("sparse", "dense"):
            raise ValueError(f"reward_type must be 'sparse' or 'dense', got {reward_type!r}")
        n_sub = round(1.0 / (control_hz * PHYSICS_DT))
        if n_sub < 1 or abs(n_sub * PHYSICS_DT * control_hz - 1.0) > 1e-6:
            raise ValueError(
                f"control_hz must divide the physics rate {1 / PHYSICS_DT:.0f} Hz, got {control_hz}"
            )
        self.task = task
        for key, value in (randomize or {}).items():
            if not hasattr(task.randomization, key):
                raise ValueError(f"unknown randomisation knob {key!r}")
            setattr(task.randomization, key, float(value))
        self.control_hz = float(control_hz)
        self.n_substeps = n_sub
        self.controller_name = controller
        self.max_dpos, self.max_drot = float(max_dpos), float(max_drot)
        self.reward_type = reward_type
        self.terminate_on_success = terminate_on_success
        self.cameras = tuple(cameras)
        self.image_size = tuple(image_size)
        self.max_episode_steps = int(max_episode_steps or task.max_episode_steps)
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": int(control_hz)}

        self.model = mujoco.MjModel.from_xml_string(
            scene_xml(task.objects_xml(), name=task.name, native_impedance=controller == "native")
        )
        self.data = mujoco.MjData(self.model)
        task.bind(self.model)
        for cam in self.cameras:
            if not self.has_camera(cam):
                raise ValueError(f"unknown camera {cam!r}")
        m = self.model
        self._arm_qadr = np.array([m.jnt_qposadr[m.joint(f"joint{i + 1}").id] for i in range(7)])
        self._finger_qadr = np.array(
            [m.jnt_qposadr[m.joint(n).id] for n in ("finger_left", "finger_right")]
        )
        self._ft = m.site("ft").id
        self._hand = m.body("hand").id
        self._gripper_act = m.actuator("gripper").id
        self._torque_act = np.array([m.actuator(f"torque{i + 1}").id for i in range(7)])
        self._ft_force_adr = m.sensor_adr[m.sensor("ft_force").id]
        self._ft_torque_adr = m.sensor_adr[m.sensor("ft_torque").id]
        self._nominal_friction = m.geom_friction.copy()
        self._nominal_mass = m.body_mass.copy()
        self._nominal_inertia = m.body_inertia.copy()

        self.state = ArmState(7)
        kw = {**SIM_CONTROLLER_DEFAULTS, **(controller_kwargs or {})}
        if stiffness is not None:
            kw["stiffness"] = np.asarray(stiffness, dtype=float)
        if controller == "impedance":
            self.controller: Any = CartesianImpedance(dt=PHYSICS_DT, **kw)
        elif controller == "osc":
            self.controller = OperationalSpace(dt=PHYSICS_DT, **kw)
        else:
            self.controller = NativeCartesianImpedance(m, self.data, **kw)
        self._reader = MjArmReader(m, with_mass=getattr(self.controller, "needs_mass", False))
        self._nominal_stiffness = np.array(self.controller.stiffness, dtype=float)
        self.commander = Commander(self.max_dpos, self.max_drot, workspace_low, workspace_high)
        self.safety = self.commander.safety  # the target stage above, the torque stage per tick
        self._loop = (
            None if controller == "native" else TorqueLoop(self, self.controller, self.safety)
        )
        self.guard: Any = None
        if safety != "filter":
            self.guard = SafetyGuard(self, safety, **(safety_kwargs or {}))
            if self.guard.grasp is not None:  # the reflex's grasp hold acts on every action
                self.commander.add_stage(self.guard.grasp)
        self._renderers: dict[str, mujoco.Renderer] = {}
        self._rng = np.random.default_rng()
        self._steps = 0

        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(7,), dtype=np.float32)
        spaces: dict[str, gym.Space] = {
            f"state/{k}": gym.spaces.Box(-np.inf, np.inf, shape=(n,), dtype=np.float32)
            for k, n in {**self.ARM_OBS_SIZES, **task.observation_sizes()}.items()
        }
        for cam in self.cameras:
            spaces[f"images/{cam}"] = gym.spaces.Box(
                0, 255, shape=(*self.image_size, 3), dtype=np.uint8
            )
        self.observation_space = gym.spaces.Dict(spaces)

    ARM_OBS_SIZES = {  # noqa: RUF012
        "joint_pos": 7,
        "joint_vel": 7,
        "ee_pos": 3,
        "ee_quat": 4,
        "ee_twist": 6,
        "wrench": 6,
        "gripper": 1,
    }

    # ------------------------------------------------------------------ state
    def read_state(self) -> ArmState:
        """Fill :attr:`state` from MjData (positions/velocities must be current)."""
        return self._reader.read(self.data, self.state)

    def external_wrench(self) -> np.ndarray:
        """(6,) wrench the environment applies to the hand [N, Nm], base frame, at the flange.

        The wrist sensor reads what the flange applies to the hand; the hand's own weight is
        removed so a free hand reads ~0 (quasi-static, as a real F/T sensor after bias removal).
        """
        d, m = self.data, self.model
        rot = d.site_xmat[self._ft].reshape(3, 3)
        f = rot @ d.sensordata[self._ft_force_adr : self._ft_force_adr + 3]
        t = rot @ d.sensordata[self._ft_torque_adr : self._ft_torque_adr + 3]
        weight = np.array([0.0, 0.0, m.body_subtreemass[self._hand] * -m.opt.gravity[2]])
        arm = d.subtree_com[self._hand] - d.site_xpos[self._ft]
        return np.concatenate([weight - f, np.cross(arm, weight) - t])

    def observe(self) -> dict[str, np.ndarray]:
        """The observation of the current state (:attr:`observation_space`; fresh arrays)."""
        d, s = self.data, self.state
        twist = s.jac @ s.dq
        obs = {
            "state/joint_pos": s.q,
            "state/joint_vel": s.dq,
            "state/ee_pos": s.ee_pos,
            "state/ee_quat": mat_to_quat(s.ee_rot),
            "state/ee_twist": twist,
            "state/wrench": self.external_wrench(),
            "state/gripper": np.array([self.gripper_opening()]),
        }
        obs.update(self.task.observe(d))
        out = {k: np.asarray(v, dtype=np.float32).copy() for k, v in obs.items()}
        for cam in self.cameras:
            out[f"images/{cam}"] = self.render_camera(cam)
        return out

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        rng, m, d = self._rng, self.model, self.data
        mujoco.mj_resetData(m, d)
        if self.guard is not None:
            self.guard.release()  # nominal stiffness before the gains are randomised
        self._randomize_physics(rng)
        q0 = panda.Q_HOME + rng.normal(0.0, self.task.randomization.joint_noise, 7)
        d.qpos[self._arm_qadr] = np.clip(q0, panda.Q_MIN, panda.Q_MAX)
        d.qpos[self._finger_qadr] = panda.FINGER_TRAVEL
        d.ctrl[self._gripper_act] = panda.FINGER_TRAVEL
        self.task.reset(m, d, rng)
        mujoco.mj_forward(m, d)
        s = self.read_state()
        self.controller.reset(s)
        self.task.after_reset(self)
        mujoco.mj_forward(m, d)
        s = self.read_state()
        # after the task's reset: a task may start with the gripper closed (a peg in the hand)
        self.commander.reset(s.ee_pos, s.ee_rot, self.gripper_command())
        self._steps = 0
        if self.guard is not None:
            self.guard.reset()
        return self.observe(), {"success": False, "intervention": False}

    def _randomize_physics(self, rng: np.random.Generator) -> None:
        r, m = self.task.randomization, self.model
        m.geom_friction[:] = self._nominal_friction
        m.body_mass[:] = self._nominal_mass
        m.body_inertia[:] = self._nominal_inertia
        for name in self.task.object_bodies:
            b = m.body(name).id
            if r.mass > 0:
                scale = rng.uniform(1 - r.mass, 1 + r.mass)
                m.body_mass[b] *= scale
                m.body_inertia[b] *= scale
            if r.friction > 0:
                geoms = np.flatnonzero(m.geom_bodyid == b)
                m.geom_friction[geoms, 0] *= rng.uniform(1 - r.friction, 1 + r.friction)
        if r.gains > 0:
            k = self._nominal_stiffness * rng.uniform(1 - r.gains, 1 + r.gains)
            self.controller.set_stiffness(k)

    def set_gripper(self, command: float) -> None:
        """Gripper servo target for ``command`` in [-1 open, +1 closed]."""
        self.set_gripper_width((1.0 - command) * panda.FINGER_TRAVEL)

    def set_gripper_width(self, width: float) -> None:
        """Gripper servo target: total finger opening ``width`` [m] (each finger travels half)."""
        self.data.ctrl[self._gripper_act] = 0.5 * width

    def gripper_opening(self) -> float:
        """Measured total finger opening [m]."""
        return float(self.data.qpos[self._finger_qadr].sum())

    def joint_positions(self) -> np.ndarray:
        """(7,) measured arm joint positions [rad] (a copy)."""
        return self.data.qpos[self._arm_qadr]

    def gripper_command(self) -> float:
        """The gripper command [-1, 1] the servo currently follows."""
        return 1.0 - 2.0 * float(self.data.ctrl[self._gripper_act]) / panda.FINGER_TRAVEL

    def track(self, pos: np.ndarray, rot: np.ndarray) -> None:
        """Make the controller track the TCP target ``pos`` (3,) [m], ``rot`` (3, 3), base
        frame (already safe: the commander's output, or a robot's equilibrium pose)."""
        self.controller.set_target(pos, rot)

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        a = np.asarray(action, dtype=float).reshape(-1)
        s = self.state
        target = self.commander.command(a, s.ee_pos, s.ee_rot, self.gripper_opening())
        self.track(target.pos, target.rot)
        self.set_gripper(target.gripper)
        flags = dict(target.flags)
        if self.guard is not None:
            executed = np.r_[np.clip(a[:6], -1.0, 1.0), target.gripper]  # after the stages
            self.guard.run(executed if np.isfinite(a).all() else None, flags)
            s = self.read_state()
        else:
            s = self.advance(self.n_substeps, flags)
        self._steps += 1
        success = self.task.success(self.data)
        if self.reward_type == "sparse":
            reward = float(success)
        else:
            reward = self.task.dense_reward(self.data, s.ee_pos)
        terminated = bool(success and self.terminate_on_success)
        truncated = self._steps >= self.max_episode_steps
        info = {"success": success, "intervention": False, "safety": flags}
        if self.guard is not None:
            self.guard.finish(info, terminated or truncated)
        return self.observe(), reward, terminated, truncated, info

    def physics_tick(self, flags: dict[str, Any] | None = None) -> None:
        """One physics tick [PHYSICS_DT s] under the controller: the native law inside MuJoCo,
        or the numpy controller's :class:`controllers.tick.TorqueLoop` (sense, control, the
        safety filter's torque stage, apply, integrate), whose flags are OR-ed into ``flags``.
        Derived quantities (site poses, sensors) stay those of the tick's start until
        :meth:`advance` or ``mj_forward``."""
        if self._loop is None:
            mujoco.mj_step(self.model, self.data)
        else:
            self._loop.tick(flags)

    # TorqueBackend (controllers.tick): MuJoCo's two-stage step around the torque computation
    def sense(self) -> ArmState:
        """Positions and velocities of the tick's start (``mj_step1``), read into :attr:`state`."""
        mujoco.mj_step1(self.model, self.data)
        return self.read_state()

    def apply_torque(self, tau: np.ndarray) -> None:
        """Joint torques (7,) [Nm] on the torque actuators for this tick."""
        self.data.ctrl[self._torque_act] = tau

    def integrate(self) -> None:
        """Finish the tick (``mj_step2``)."""
        mujoco.mj_step2(self.model, self.data)

    def advance(self, ticks: int, flags: dict[str, Any] | None = None) -> ArmState:
        """``ticks`` physics ticks (:meth:`physics_tick`), then the derived quantities and
        :attr:`state` of the new physics state, which it returns."""
        if self._loop is None:
            mujoco.mj_step(self.model, self.data, nstep=ticks)
        else:
            self._loop.run(ticks, flags)
        mujoco.mj_forward(self.model, self.data)
        return self.read_state()

    # ------------------------------------------------------------------ rendering
    def has_camera(self, camera: str) -> bool:
        """Whether the scene has a camera of that name."""
        return mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, camera) >= 0

    def render_camera(self, camera: str, *, video: bool = False) -> np.ndarray:
        """(H, W, 3) uint8 image from ``camera`` at :attr:`image_size`.

        Observations (``video=False``) are drawn the cheap way a CPU renderer needs: no
        shadows, reflections or skybox and no multisampling. Videos keep MuJoCo's full look.
        """
        key = "video" if video else "obs"
        renderer = self._renderers.get(key)
        if renderer is None:
            quality = self.model.vis.quality
            samples = quality.offsamples
            quality.offsamples = samples if video else 0  # read when the context is made
            try:
                renderer = mujoco.Renderer(self.model, *self.image_size)
            finally:
                quality.offsamples = samples
            if not video:
                for flag in OBS_RENDER_OFF:  # scene flags persist across update_scene
                    renderer.scene.flags[flag] = 0
            self._renderers[key] = renderer
        renderer.update_scene(self.data, camera=camera)
        return renderer.render().copy()

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return self.render_camera(self.cameras[0] if self.cameras else "front", video=True)

    def close(self) -> None:
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()

"""Gymnasium env of the Panda in PyBullet: the same action, observation and controller stack as
:class:`sim.env.PandaEnv`, on another simulator and another robot model (pybullet_data's URDF).

Used as a stand-in for reality: policies trained in MuJoCo are evaluated and fine-tuned here.
Per control step (20 Hz by default) the action becomes a TCP target, passes
:class:`controllers.safety_filter.SafetyFilter`, then ``physics_hz / control_hz`` PyBullet steps
run with the numpy controller (``impedance`` or ``osc``) computing joint torques every tick,
each passed through the filter's torque stage -- the code path the hardware runs.

Shapes as in :mod:`sim.env`: action (7,) in [-1, 1]; observations ``state/*`` float32 with the
same keys and sizes as the MuJoCo env of the same task. No camera observations (state only);
:meth:`render_camera` draws the front view for videos.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pybullet as pb

from controllers import panda
from controllers.arm_state import ArmState
from controllers.commander import DEFAULT_MAX_DPOS, DEFAULT_MAX_DROT, Commander
from controllers.impedance import CartesianImpedance
from controllers.operational_space import OperationalSpace
from controllers.rotations import mat_to_quat
from controllers.tick import TorqueLoop
from sim.arm import PHYSICS_DT
from sim.env import SIM_CONTROLLER_DEFAULTS, PandaEnv
from sim.pybullet_arm import PyBulletPanda
from sim.pybullet_tasks import PYBULLET_TASKS, PyBulletTask

CONTROLLERS = ("impedance", "osc")
# MuJoCo's ``front`` camera (sim/arm.py): eye, a point 1.3 m along its view axis, its up axis.
FRONT_EYE, FRONT_TARGET, FRONT_UP = (1.3, -0.8, 0.9), (0.415, -0.091, 0.263), (-0.383, 0.306, 0.872)
SOLVER_ITERATIONS = 50  # PyBullet's default; fewer let a grasped cube slip
# Contact points stay in Bullet's manifolds until they separate by this much (default 2 cm):
# with the peg's 0.5 mm side clearance, stale points on the hole's rim held the peg up
# (peg_insert expert: 17/20 -> 20/20 on seeds 1000-1019 at 1 mm).
CONTACT_BREAKING_THRESHOLD = 0.001  # [m]


class PyBulletPandaEnv(gym.Env):
    """One Panda, one task, in its own PyBullet DIRECT client (no GUI, no shared state).

    Args: as :class:`sim.env.PandaEnv` (``task`` is a :class:`~sim.pybullet_tasks.PyBulletTask`),
    except ``controller`` is ``"impedance"`` (default) or ``"osc"`` -- PyBullet has no native
    impedance law -- and ``cameras`` must be empty.
    """

    metadata = {"render_modes": [], "render_fps": 20}  # noqa: RUF012 - gym API
    ARM_OBS_SIZES = PandaEnv.ARM_OBS_SIZES

    def __init__(
        self,
        task: PyBulletTask,
        *,
        control_hz: float = 20.0,
        controller: str = "impedance",
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
        **unused: Any,
    ) -> None:
        if controller not in CONTROLLERS:
            raise ValueError(
                f"pybullet controller must be one of {CONTROLLERS}, got {controller!r}"
            )
        if reward_type not in ("sparse", "dense"):
            raise ValueError(f"reward_type must be 'sparse' or 'dense', got {reward_type!r}")
        if cameras:
            raise ValueError(f"the pybullet backend renders no cameras, got {tuple(cameras)}")
        unknown = set(unused) - {"render_mode"}
        if unknown:
            raise TypeError(f"unexpected keyword arguments {sorted(unknown)}")
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
        self.cameras = ()
        self.image_size = tuple(image_size)
        self.max_episode_steps = int(max_episode_steps or task.max_episode_steps)

        self.client = pb.connect(pb.DIRECT)
        c = self.client
        pb.setGravity(0, 0, -9.81, physicsClientId=c)
        pb.setPhysicsEngineParameter(
            fixedTimeStep=PHYSICS_DT,
            numSolverIterations=SOLVER_ITERATIONS,
            contactBreakingThreshold=CONTACT_BREAKING_THRESHOLD,
            physicsClientId=c,
        )
        kw = {**SIM_CONTROLLER_DEFAULTS, **(controller_kwargs or {})}
        if stiffness is not None:
            kw["stiffness"] = np.asarray(stiffness, dtype=float)
        if controller == "impedance":
            self.controller: Any = CartesianImpedance(dt=PHYSICS_DT, **kw)
        else:
            self.controller = OperationalSpace(dt=PHYSICS_DT, **kw)
        self.arm = PyBulletPanda(c, with_mass=getattr(self.controller, "needs_mass", False))
        self.floor = pb.loadURDF("plane.urdf", physicsClientId=c)
        task.build(c)
        self._nominal_stiffness = np.array(self.controller.stiffness, dtype=float)
        self.commander = Commander(self.max_dpos, self.max_drot, workspace_low, workspace_high)
        self.safety = self.commander.safety  # the target stage above, the torque stage per tick
        self._loop = TorqueLoop(self, self.controller, self.safety)
        self.state = ArmState(7)
        self._rng = np.random.default_rng()
        self._steps = 0

        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(7,), dtype=np.float32)
        self.observation_space = gym.spaces.Dict(
            {
                f"state/{k}": gym.spaces.Box(-np.inf, np.inf, shape=(n,), dtype=np.float32)
                for k, n in {**self.ARM_OBS_SIZES, **task.observation_sizes()}.items()
            }
        )

    # ------------------------------------------------------------------ state
    def _flange_pos(self) -> np.ndarray:
        s = self.state
        return s.ee_pos - s.ee_rot[:, 2] * panda.TCP_OFFSET

    def observe(self) -> dict[str, np.ndarray]:
        s = self.state
        obs = {
            "state/joint_pos": s.q,
            "state/joint_vel": s.dq,
            "state/ee_pos": s.ee_pos,
            "state/ee_quat": mat_to_quat(s.ee_rot),
            "state/ee_twist": s.jac @ s.dq,
            "state/wrench": self.arm.external_wrench(self._flange_pos()),
            "state/gripper": np.array([self.arm.gripper_opening()]),
        }
        obs.update(self.task.observe(self.client))
        return {k: np.asarray(v, dtype=np.float32).copy() for k, v in obs.items()}

    # TorqueBackend (controllers.tick)
    def sense(self) -> ArmState:
        """Joint state and TCP pose, read into :attr:`state`."""
        return self.arm.read(self.state)

    def apply_torque(self, tau: np.ndarray) -> None:
        """Joint torques (7,) [Nm] for this tick."""
        self.arm.apply_torque(tau)

    def integrate(self) -> None:
        """One PyBullet step of PHYSICS_DT."""
        pb.stepSimulation(physicsClientId=self.client)

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        rng = self._rng
        r = self.task.randomization
        # Same draw order as PandaEnv.reset: one seed, one initial scene in both backends.
        q0 = panda.Q_HOME + rng.normal(0.0, r.joint_noise, 7)
        self.arm.reset(np.clip(q0, panda.Q_MIN, panda.Q_MAX))
        self.task.reset(self.client, rng)
        if r.gains > 0:
            k = self._nominal_stiffness * rng.uniform(1 - r.gains, 1 + r.gains)
            self.controller.set_stiffness(k)
        s = self.arm.read(self.state)
        self.task.after_reset(self)
        self.controller.reset(s)
        self.commander.reset(s.ee_pos, s.ee_rot, self.arm.gripper_command())
        self._steps = 0
        return self.observe(), {"success": False, "intervention": False}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        s = self.state
        target = self.commander.command(action, s.ee_pos, s.ee_rot)
        self.controller.set_target(target.pos, target.rot)
        self.arm.set_gripper(0.5 * (1.0 - target.gripper) * panda.FINGER_TRAVEL)
        flags: dict[str, object] = dict(target.flags)  # the tick loop adds its own

        self._loop.run(self.n_substeps, flags)
        self.arm.read(s)
        self._steps += 1
        success = self.task.success(self.client, s.ee_pos)
        if self.reward_type == "sparse":
            reward = float(success)
        else:
            reward = self.task.dense_reward(self.client, s.ee_pos)
        terminated = bool(success and self.terminate_on_success)
        truncated = self._steps >= self.max_episode_steps
        info = {"success": success, "intervention": False, "safety": flags}
        return self.observe(), reward, terminated, truncated, info

    # ------------------------------------------------------------------ rendering
    def render_camera(self, camera: str, *, video: bool = True) -> np.ndarray:
        """(H, W, 3) uint8 image at :attr:`image_size` from ``front`` (MuJoCo's front camera
        pose), by PyBullet's CPU TinyRenderer; for videos, not for observations (``video`` is
        accepted for :class:`sim.env.PandaEnv`'s signature)."""
        if camera != "front":
            raise ValueError(f"the pybullet backend renders only 'front', got {camera!r}")
        h, w = self.image_size
        view = pb.computeViewMatrix(FRONT_EYE, FRONT_TARGET, FRONT_UP, physicsClientId=self.client)
        proj = pb.computeProjectionMatrixFOV(45.0, w / h, 0.05, 5.0, physicsClientId=self.client)
        img = pb.getCameraImage(
            w, h, view, proj, renderer=pb.ER_TINY_RENDERER, physicsClientId=self.client
        )[2]
        return np.asarray(img, dtype=np.uint8).reshape(h, w, 4)[:, :, :3].copy()

    def close(self) -> None:
        if self.client is not None and pb.isConnected(physicsClientId=self.client):
            pb.disconnect(physicsClientId=self.client)
        self.client = None  # type: ignore[assignment]


def make_pybullet(task: str, **kwargs: Any) -> PyBulletPandaEnv:
    """Build the PyBullet env of ``task`` (see :class:`PyBulletPandaEnv` for keywords)."""
    if task not in PYBULLET_TASKS:
        raise ValueError(f"no pybullet task {task!r}; available: {sorted(PYBULLET_TASKS)}")
    return PyBulletPandaEnv(PYBULLET_TASKS[task](), **kwargs)

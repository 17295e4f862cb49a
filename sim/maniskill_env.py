"""ManiSkill3 tasks (PickCube, PegInsertionSide) behind our observation / action conventions.

ManiSkill's Panda is driven by its ``pd_ee_delta_pose`` controller (20 Hz, deltas relative to
the current TCP pose, translation in base-frame axes, rotation about base-frame axes at the
TCP), which is our action convention up to scale and the gripper's sign:

    ours (7,) in [-1, 1]: xyz * 2 cm, rotation vector * 0.1 rad, gripper -1 open / +1 closed
    ManiSkill (7,) in [-1, 1]: xyz * 10 cm, rotation * 0.1 rad, gripper -1 closed / +1 open

Every action first passes our :class:`controllers.safety_filter.SafetyFilter` (workspace box,
step limit, NaN -> hold) as a TCP target; the filtered target is sent as ManiSkill's delta.
Observations are remapped from ManiSkill's ``state_dict`` into our ``state/*`` keys
(:data:`MANISKILL_TASKS` lists the task entries); positions are in the robot's base frame
(ManiSkill's are world-frame with the base at x = -0.615 m; its base is not rotated).
``wrench`` is the net contact force on the hand and finger links [N, base frame] with a zero
torque part (ManiSkill reports no F/T torques), and ``ee_twist`` is the TCP link's velocity.
Gymnasium API, one env (num_envs=1).

No render device (this machine: SAPIEN finds no Vulkan device, even for
``render_backend="none"``, because building visual shapes and materials needs one):
``collision_only=True`` (the default with ``render_backend="none"``) drops every visual shape
and stubs ``RenderMaterial`` before ManiSkill builds its scene, so CPU PhysX (``physx_cpu``) runs
with no renderer. This patches SAPIEN's builders process-wide; physics and contacts are
untouched (collision shapes carry their own physical materials). GPU-parallel PhysX
(``physx_cuda``, many envs per process) needs CUDA and is not exercised here.

The conversions (:func:`to_maniskill_action`, :func:`from_state_dict`) are plain numpy and are
tested without SAPIEN; the env itself needs the ``maniskill`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from controllers.commander import DEFAULT_MAX_DPOS, DEFAULT_MAX_DROT, Commander
from controllers.rotations import quat_to_mat
from sim.env import PandaEnv

MS_MAX_DPOS = 0.1  # [m] per action unit of ManiSkill's pd_ee_delta_pose
MS_MAX_DROT = 0.1  # [rad] per action unit
HAND_LINKS = ("panda_hand", "panda_leftfinger", "panda_rightfinger")


@dataclass(frozen=True)
class ManiSkillTask:
    """How one ManiSkill task maps onto our conventions.

    Attributes:
        env_id: ManiSkill's registered id.
        extras: our ``state/<name>`` -> (ManiSkill ``extra`` key, slice start, slice stop).
        max_episode_steps: horizon at 20 Hz (ManiSkill's default for the task).
    """

    env_id: str
    extras: dict[str, tuple[str, int, int]]
    max_episode_steps: int

    def observation_sizes(self) -> dict[str, int]:
        """Sizes of the task entries (``state/<name>`` without the prefix)."""
        return {k: stop - start for k, (_, start, stop) in self.extras.items()}


MANISKILL_TASKS: dict[str, ManiSkillTask] = {
    "PickCube": ManiSkillTask(
        "PickCube-v1",
        {
            "cube_pos": ("obj_pose", 0, 3),
            "cube_quat": ("obj_pose", 3, 7),
            "goal_pos": ("goal_pos", 0, 3),
        },
        50,
    ),
    "PegInsertionSide": ManiSkillTask(
        "PegInsertionSide-v1",
        {
            "peg_pos": ("peg_pose", 0, 3),
            "peg_quat": ("peg_pose", 3, 7),
            "peg_half_size": ("peg_half_size", 0, 3),
            "hole_pos": ("box_hole_pose", 0, 3),
            "hole_quat": ("box_hole_pose", 3, 7),
            "hole_radius": ("box_hole_radius", 0, 1),
        },
        100,
    ),
}


def to_maniskill_action(
    action: np.ndarray, max_dpos: float = DEFAULT_MAX_DPOS, max_drot: float = DEFAULT_MAX_DROT
) -> np.ndarray:
    """Our (7,) action in [-1, 1] -> ManiSkill's normalised ``pd_ee_delta_pose`` (7,) float32.

    Translation is rescaled from ``max_dpos`` [m] to ManiSkill's 10 cm per unit, rotation from
    ``max_drot`` [rad] to its 0.1 rad, and the gripper sign flipped (ours +1 = closed).
    The action must be finite (:class:`ManiSkillEnv` sends the safety filter's output).
    """
    a = np.asarray(action, dtype=float).reshape(-1)
    if a.shape != (7,):
        raise ValueError(f"action must have shape (7,), got {np.shape(action)}")
    if not np.isfinite(a).all():
        raise ValueError(f"action must be finite, got {a}")
    a = np.clip(a, -1.0, 1.0)
    out = np.empty(7, dtype=np.float32)
    out[:3] = a[:3] * (max_dpos / MS_MAX_DPOS)
    out[3:6] = a[3:6] * (max_drot / MS_MAX_DROT)
    out[6] = -a[6]
    return out


def from_state_dict(
    obs: dict[str, Any],
    task: ManiSkillTask,
    twist: np.ndarray | None = None,
    wrench: np.ndarray | None = None,
    base_pos: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """ManiSkill ``state_dict`` observation of one env (leading batch dim 1 allowed, torch or
    numpy) -> our ``state/*`` dict of float32 arrays.

    Args:
        obs: ``{"agent": {"qpos": (9,), "qvel": (9,)}, "extra": {"tcp_pose": (7,), ...}}``.
        task: which extras to read.
        twist: (6,) TCP twist [m/s, rad/s], base frame; zeros when None.
        wrench: (6,) external wrench [N, Nm]; zeros when None.
        base_pos: (3,) robot base position in ManiSkill's world [m], subtracted from every
            position (``*_pos`` entries, the TCP); the base must not be rotated.
    """

    def arr(x: Any) -> np.ndarray:
        x = x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)
        return x.reshape(-1).astype(np.float32)

    agent, extra = obs["agent"], obs["extra"]
    qpos, qvel, tcp = arr(agent["qpos"]), arr(agent["qvel"]), arr(extra["tcp_pose"])
    base = np.zeros(3, np.float32) if base_pos is None else np.asarray(base_pos, np.float32)
    tcp[:3] -= base
    out = {
        "state/joint_pos": qpos[:7],
        "state/joint_vel": qvel[:7],
        "state/ee_pos": tcp[:3],
        "state/ee_quat": tcp[3:7],  # SAPIEN quaternions are (w, x, y, z), as ours
        "state/ee_twist": np.zeros(6, np.float32) if twist is None else arr(twist),
        "state/wrench": np.zeros(6, np.float32) if wrench is None else arr(wrench),
        "state/gripper": np.array([qpos[7] + qpos[8]], dtype=np.float32),
    }
    for name, (key, start, stop) in task.extras.items():
        if key not in extra:
            raise KeyError(f"ManiSkill observation has no extra {key!r}; has {sorted(extra)}")
        value = arr(extra[key])[start:stop]
        out[f"state/{name}"] = value - base if name.endswith("_pos") else value
    return out


_PATCHED = False


def collision_only_scenes() -> None:
    """Make SAPIEN build scenes without any render object (idempotent, process-wide).

    Visual shapes are dropped at the builder (an actor without visual records gets no render
    component) and ``RenderMaterial``, which asks for a render device when constructed, becomes
    an inert stand-in wherever SAPIEN / ManiSkill import it.
    """
    global _PATCHED
    if _PATCHED:
        return
    import sapien.render
    import sapien.wrapper.urdf_loader as urdf_loader
    from sapien.wrapper import actor_builder

    class _NoRenderMaterial:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.base_color = kwargs.get("base_color", [1.0, 1.0, 1.0, 1.0])

        def __getattr__(self, name: str) -> Any:
            return lambda *args, **kwargs: None

    def _no_visual(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self

    sapien.render.RenderMaterial = _NoRenderMaterial
    urdf_loader.RenderMaterial = _NoRenderMaterial
    for name in dir(actor_builder.ActorBuilder):
        if name.startswith("add_") and "visual" in name:
            setattr(actor_builder.ActorBuilder, name, _no_visual)
    _PATCHED = True


class ManiSkillEnv(gym.Env):
    """One ManiSkill3 task with our observation keys and action convention.

    Args:
        task: a key of :data:`MANISKILL_TASKS`.
        sim_backend: ManiSkill's ``physx_cpu`` (default) or ``physx_cuda``.
        render_backend: ``"none"`` (default: state only) or a SAPIEN render device.
        collision_only: build scenes without render objects; default ``render_backend ==
            "none"`` (needed where SAPIEN finds no render device).
        max_dpos, max_drot: our action scales [m], [rad] per unit.
        max_episode_steps: truncation horizon; default ManiSkill's for the task.
        reward_type: ``"sparse"`` (1 on success) or ``"dense"`` (ManiSkill's normalized dense).
        terminate_on_success: end the episode when the task succeeds.
    """

    ARM_OBS_SIZES = PandaEnv.ARM_OBS_SIZES

    def __init__(
        self,
        task: str,
        *,
        sim_backend: str = "physx_cpu",
        render_backend: str = "none",
        collision_only: bool | None = None,
        max_dpos: float = DEFAULT_MAX_DPOS,
        max_drot: float = DEFAULT_MAX_DROT,
        max_episode_steps: int | None = None,
        reward_type: str = "sparse",
        terminate_on_success: bool = True,
    ) -> None:
        self.spec_ms = maniskill_task(task)
        if reward_type not in ("sparse", "dense"):
            raise ValueError(f"reward_type must be 'sparse' or 'dense', got {reward_type!r}")
        if sim_backend not in ("physx_cpu", "physx_cuda"):
            raise ValueError(
                f"sim_backend must be 'physx_cpu' or 'physx_cuda', got {sim_backend!r}"
            )
        if collision_only is None:
            collision_only = render_backend == "none"
        if collision_only:
            collision_only_scenes()
        import mani_skill.envs  # noqa: F401 - registers the tasks

        self.max_dpos, self.max_drot = float(max_dpos), float(max_drot)
        self.max_episode_steps = int(max_episode_steps or self.spec_ms.max_episode_steps)
        self.reward_type = reward_type
        self.terminate_on_success = terminate_on_success
        self.control_hz = 20.0
        self._env = gym.make(
            self.spec_ms.env_id,
            obs_mode="state_dict",
            control_mode="pd_ee_delta_pose",
            reward_mode="normalized_dense" if reward_type == "dense" else "sparse",
            sim_backend=sim_backend,
            render_backend=render_backend,
            num_envs=1,
            max_episode_steps=self.max_episode_steps,
        )
        agent: Any = getattr(self._env.unwrapped, "agent")  # noqa: B009 - ManiSkill attribute
        pose = agent.robot.pose
        self._base_pos = pose.p.reshape(-1).cpu().numpy().astype(float)
        if not np.allclose(pose.q.reshape(-1).cpu().numpy(), [1, 0, 0, 0], atol=1e-6):
            raise ValueError(f"{task}: the robot base is rotated ({pose.q}); not supported")
        self.commander = Commander(self.max_dpos, self.max_drot)
        self.safety = self.commander.safety
        self._obs: dict[str, np.ndarray] = {}
        self._target = (np.zeros(3), np.eye(3))  # tracked TCP pose (base frame)
        self._gripper = -1.0
        self._tcp = agent.tcp
        self._hand_links = [link for link in agent.robot.get_links() if link.name in HAND_LINKS]
        self._steps = 0
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(7,), dtype=np.float32)
        sizes = {**self.ARM_OBS_SIZES, **self.spec_ms.observation_sizes()}
        self.observation_space = gym.spaces.Dict(
            {
                f"state/{k}": gym.spaces.Box(-np.inf, np.inf, shape=(n,), dtype=np.float32)
                for k, n in sizes.items()
            }
        )

    def _observe(self, raw: dict[str, Any]) -> dict[str, np.ndarray]:
        twist = np.concatenate(
            [
                self._tcp.get_linear_velocity().reshape(-1).cpu().numpy(),
                self._tcp.get_angular_velocity().reshape(-1).cpu().numpy(),
            ]
        )
        force = sum(
            (link.get_net_contact_forces().reshape(-1).cpu().numpy() for link in self._hand_links),
            np.zeros(3),
        )
        wrench = np.concatenate([force, np.zeros(3)])
        self._obs = from_state_dict(raw, self.spec_ms, twist, wrench, self._base_pos)
        return self._obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        raw, _ = self._env.reset(seed=seed, options=options)
        self._steps = 0
        obs = self._observe(raw)
        rot = quat_to_mat(obs["state/ee_quat"].astype(float))
        self.commander.reset(obs["state/ee_pos"].astype(float), rot)
        self.track(obs["state/ee_pos"].astype(float), rot)
        self.set_gripper(self.commander.gripper)
        return obs, {"success": False, "intervention": False}

    # TargetBackend (controllers.tick): ManiSkill's pd_ee_delta_pose controller tracks it
    def track(self, pos: np.ndarray, rot: np.ndarray) -> None:
        """Set the (already safe) TCP target ``pos`` (3,) [m], ``rot`` (3, 3), base frame, that
        the next :meth:`step` moves to."""
        self._target = (np.asarray(pos, dtype=float), np.asarray(rot, dtype=float))

    def set_gripper(self, command: float) -> None:
        """Gripper command in [-1 open, +1 closed] for the next :meth:`step`."""
        self._gripper = float(command)

    def _advance(self) -> tuple[Any, Any, Any]:
        """One ManiSkill step toward the tracked target: ManiSkill's controller takes deltas,
        so the target becomes a delta from the measured TCP pose again."""
        ee_pos = self._obs["state/ee_pos"].astype(float)
        ee_rot = quat_to_mat(self._obs["state/ee_quat"].astype(float))
        delta = self.commander.to_action(*self._target, ee_pos, ee_rot)
        delta[6] = self._gripper
        ms_action = to_maniskill_action(delta, self.max_dpos, self.max_drot)
        raw, reward, _, _, ms_info = self._env.step(ms_action[None])
        return raw, reward, ms_info

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        ee_pos = self._obs["state/ee_pos"].astype(float)
        ee_rot = quat_to_mat(self._obs["state/ee_quat"].astype(float))
        target = self.commander.command(action, ee_pos, ee_rot)
        self.set_gripper(target.gripper)
        self.track(target.pos, target.rot)
        flags = dict(target.flags)
        raw, reward, ms_info = self._advance()
        self._steps += 1
        success = bool(np.asarray(ms_info["success"]).reshape(-1)[0])
        if self.reward_type == "sparse":
            r = float(success)
        else:
            r = float(np.asarray(reward).reshape(-1)[0])
        terminated = bool(success and self.terminate_on_success)
        truncated = self._steps >= self.max_episode_steps
        info = {"success": success, "intervention": False, "safety": flags}
        return self._observe(raw), r, terminated, truncated, info

    def close(self) -> None:
        self._env.close()


def maniskill_task(task: str) -> ManiSkillTask:
    """The mapping of ``task``; raises ValueError listing the available ones."""
    if task not in MANISKILL_TASKS:
        raise ValueError(f"no ManiSkill task {task!r}; available: {sorted(MANISKILL_TASKS)}")
    return MANISKILL_TASKS[task]


def make_maniskill(task: str, **kwargs: Any) -> ManiSkillEnv:
    """Build the ManiSkill env of ``task`` (see :class:`ManiSkillEnv` for keywords)."""
    return ManiSkillEnv(task, **kwargs)

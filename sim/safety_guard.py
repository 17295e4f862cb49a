"""Per-tick safety of the simulated arm: constraint costs measured at the physics rate and,
optionally, the safety reflex evaluated at ``reflex_hz`` (``sim.make(task, safety=...)``).

``safety="monitor"``: every physics tick (500 Hz) the contact force the robot exerts on the
fixed surroundings (the sum of contact force magnitudes between the arm, hand and fingers, or
an object the task holds rigidly in the hand (:data:`HELD_OBJECTS`), and geoms welded to the
world, mocap fixtures included: table, hole block), the TCP position and the joint positions
are checked by :class:`controllers.constraint_cost.ConstraintCost`; the step's cost
(1 if any tick violated a constraint), the peak force and the reflex features reach
``info["safety"]``.

``safety="reflex"``: in addition, every ``1 / reflex_hz`` the
:class:`controllers.reflex.Reflex` evaluates the risk of the commanded action. When it
intervenes, its recovery action (or, in the slowing zone between eps_soft and eps_safe, the
slowed command) becomes the target (through the deterministic safety filter, exactly as a
policy action) and, in contact (``soften="always"``: whenever it intervenes), the stiffness
drops to ``stiffness_scale`` x; the nominal stiffness returns at the first policy step whose
action the critic finds below eps_soft (eps_safe without a slowing zone) and that starts out of
contact. The substituted target holds until the next policy step; within a step it is replaced
only by a stronger intervention (slowed -> recovery).

Reflex features (O = 10 + task keys), all measurable on hardware (:data:`FEATURES`):
TCP position [m] and linear velocity [m/s] (base frame), external force at the wrist [N]
(base frame), gripper opening [m], then the task observation keys in ``task_keys``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mujoco
import numpy as np

from controllers.constraint_cost import CONSTRAINTS, FORCE_LIMIT, ConstraintCost
from controllers.grasp_hold import GraspHold
from controllers.reflex import BRAKE_TIME, Reflex, RiskMLP
from controllers.reflex_stage import FEATURES, ReflexStage, robot_features

MODES = ("monitor", "reflex")
REFLEX_HZ = 500.0  # every physics tick
# Objects that start in the hand and stay there: their contacts count as the robot's. A cube
# the gripper squeezes on the table does not count (the squeeze loads the cube-table contact
# with a few hundred N in sim even for the expert's grasp).
HELD_OBJECTS: dict[str, tuple[str, ...]] = {"peg_insert": ("peg",)}
# TCP height [m] above which the reflex keeps a held object gripped (GraspHold), per task. On
# peg_insert the TCP is at 0.067-0.070 when the peg is in (expert, 5 episodes), so 0.08 keeps
# the peg in the hand until its tip is about 1 cm from home, where a noisy open command would
# otherwise drop it onto the block (what the hold changes: docs/results.md, grasp hold).
GRASP_RELEASE_Z: dict[str, float] = {"peg_insert": 0.08}


class SafetyGuard:
    """Runs an env's physics ticks of one control step with constraint monitoring and reflex.

    Args:
        env: the :class:`sim.env.PandaEnv` it belongs to.
        mode: ``"monitor"`` or ``"reflex"``.
        critic: path of the exported risk critic (``.npz``); required for ``"reflex"``.
        threshold: eps_safe override (default: the export's).
        stiffness_scale: stiffness multiplier while the reflex intervenes.
        reflex_hz: reflex evaluation rate [Hz]; must divide the physics rate.
        force_limit: contact force limit [N] of the constraint cost.
        task_keys: task observation keys appended to the features (e.g. ``("hole_pos",)``).
        recovery: how the reflex picks its recovery action (:data:`controllers.reflex.RECOVERIES`).
        soft_threshold: eps_soft of the slowing zone (default: the export's; none: no zone).
        slow_min: motion scale at eps_safe in the slowing zone (default: the export's).
        soften: when the stiffness drops (:data:`controllers.reflex.SOFTEN`).
        slowing: how the slowing zone slows (:data:`controllers.reflex.SLOWING`).
        brake_time: the brake target lies this far [s] behind the TCP's motion.
        slow_in_contact: the slowing zone also acts in contact (False: free space only).
        grasp_release_z: with the reflex, a held object stays gripped while the TCP is above
            this height [m] (:class:`controllers.grasp_hold.GraspHold`); ``"task"``: the
            task's (:data:`GRASP_RELEASE_Z`, else off); None: off.
    """

    def __init__(
        self,
        env: Any,
        mode: str = "monitor",
        critic: str | None = None,
        threshold: float | None = None,
        stiffness_scale: float = 0.25,
        reflex_hz: float = REFLEX_HZ,
        force_limit: float | None = None,
        task_keys: Sequence[str] = (),
        recovery: str = "hold",
        soft_threshold: float | None = None,
        slow_min: float | None = None,
        soften: str = "contact",
        slowing: str = "cap",
        brake_time: float = BRAKE_TIME,
        grasp_release_z: float | str | None = "task",
        slow_in_contact: bool = True,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"safety mode must be one of {MODES}, got {mode!r}")
        self.env, self.mode = env, mode
        m = env.model
        self._tcp = m.site("tcp").id
        self.cost = ConstraintCost(
            env.safety.workspace_low,
            env.safety.workspace_high,
            force_limit=FORCE_LIMIT if force_limit is None else force_limit,
        )
        self.task_keys = tuple(task_keys)
        sizes = env.task.observation_sizes()
        for k in self.task_keys:
            if k not in sizes:
                raise ValueError(f"unknown task key {k!r}; the task observes {sorted(sizes)}")
        self.feature_names = [n for n, _ in FEATURES] + [f"task/{k}" for k in self.task_keys]
        self._feat = np.zeros(sum(n for _, n in FEATURES) + sum(sizes[k] for k in task_keys))
        self._vel6 = np.zeros(6)
        self._cf = np.zeros(6)
        body = m.geom_bodyid
        self._static = (m.body_weldid[body] == 0) | (m.body_mocapid[body] >= 0)
        robot_root = m.body_rootid[m.body("hand").id]
        held = [m.body(n).id for n in HELD_OBJECTS.get(env.task.name, ())]
        self._robot = (m.body_rootid[body] == robot_root) | np.isin(body, held)
        self.reflex: Reflex | None = None
        self.stage: ReflexStage | None = None
        self.ticks_per_eval = 1
        if mode == "reflex":
            if critic is None:
                raise ValueError("safety='reflex' needs critic=<path of an exported .npz>")
            mlp = RiskMLP.from_file(critic)
            if mlp.feature_names and mlp.feature_names != self.feature_names:
                raise ValueError(
                    f"critic was trained on features {mlp.feature_names}, "
                    f"this env computes {self.feature_names} (set task_keys to match)"
                )
            if mlp.obs_dim != self._feat.shape[0]:
                raise ValueError(f"critic expects {mlp.obs_dim} features, got {self._feat.shape}")
            self.reflex = Reflex(
                mlp,
                threshold=threshold,
                stiffness_scale=stiffness_scale,
                recovery=recovery,
                action_scale=env.max_dpos,
                soft_threshold=soft_threshold,
                slow_min=slow_min,
                soften=soften,
                slowing=slowing,
                brake_time=brake_time,
                slow_in_contact=slow_in_contact,
            )
            self.stage = ReflexStage(self.reflex, env.controller)
            ticks = env.n_substeps * env.control_hz / reflex_hz
            if ticks < 1 or abs(ticks - round(ticks)) > 1e-6:
                raise ValueError(f"reflex_hz must divide the physics rate, got {reflex_hz}")
            self.ticks_per_eval = round(ticks)
        self.grasp: GraspHold | None = None
        if grasp_release_z == "task":
            grasp_release_z = GRASP_RELEASE_Z.get(env.task.name) if mode == "reflex" else None
        elif isinstance(grasp_release_z, str):
            raise ValueError(
                f"grasp_release_z must be a height [m], 'task' or None, got {grasp_release_z!r}"
            )
        if grasp_release_z is not None:
            if mode != "reflex":
                raise ValueError("grasp_release_z acts on commands: it needs safety='reflex'")
            self.grasp = GraspHold(float(grasp_release_z))
        self._feat_start = np.zeros_like(self._feat)
        self._exec_first = np.zeros(7)
        self._mid_step = False
        # (s, a, c, s', done, reflex stepped in after the first tick) per finished step
        self.on_transition: Callable[..., None] | None = None
        self.counts = {
            "steps": 0,
            "violation_steps": 0,
            "reflex_steps": 0,
            "reflex_ticks": 0,
            "grasp_holds": 0,
            **{f"violation_{k}": 0 for k in CONSTRAINTS},
        }

    # ------------------------------------------------------------------ features
    def features(self) -> np.ndarray:
        """(O,) reflex features of the current state (an internal buffer)."""
        env, d, f = self.env, self.env.data, self._feat
        mujoco.mj_objectVelocity(env.model, d, mujoco.mjtObj.mjOBJ_SITE, self._tcp, self._vel6, 0)
        robot_features(  # velocity: the linear part, world frame
            f, d.site_xpos[self._tcp], self._vel6[3:], env.external_wrench()[:3],
            env.gripper_opening(),
        )  # fmt: skip
        if self.task_keys:
            obs = env.task.observe(d)
            i = 10
            for k in self.task_keys:
                v = np.ravel(obs[f"state/{k}"])
                f[i : i + v.shape[0]] = v
                i += v.shape[0]
        return f

    def contact_force(self) -> float:
        """Sum of contact force magnitudes [N] between the robot (and a held object) and the
        fixed surroundings (current contacts)."""
        m, d, static, robot, cf = (
            self.env.model, self.env.data, self._static, self._robot, self._cf
        )  # fmt: skip
        total = 0.0
        for i in range(d.ncon):
            con = d.contact[i]
            g1, g2 = con.geom1, con.geom2
            if (static[g1] and robot[g2]) or (static[g2] and robot[g1]):
                mujoco.mj_contactForce(m, d, i, cf)
                total += float(np.sqrt(cf[0] * cf[0] + cf[1] * cf[1] + cf[2] * cf[2]))
        return total

    # ------------------------------------------------------------------ episode / step
    def reset(self) -> None:
        """Episode start (after the env's reset): features of the initial state."""
        if self.stage is not None:
            self.stage.reset()
        np.copyto(self._feat_start, self.features())

    def run(self, action: np.ndarray | None, flags: dict[str, Any]) -> None:
        """The physics ticks of one control step for the executed ``action`` (7,) (after the
        commander's stages, the grasp hold among them; None: non-finite, held by the filter);
        merges what happened into ``flags`` (the step's ``info["safety"]``)."""
        env = self.env
        m, d = env.model, env.data
        flags.setdefault("grasp_hold", False)  # the grasp hold ran in the env's commander
        self.counts["grasp_holds"] += int(flags["grasp_hold"])
        stage = self.stage
        if stage is not None:
            stage.begin(action)
        if action is None:
            self._exec_first[:] = 0.0
        else:
            np.copyto(self._exec_first, action)
        self._mid_step = False
        step_cost, force_max = 0, 0.0
        fired = dict.fromkeys(CONSTRAINTS, False)
        for tick in range(env.n_substeps):
            if stage is not None and tick % self.ticks_per_eval == 0:
                replacement = stage.tick(self.features())
                if replacement is not None:
                    self._retarget(replacement, flags)
                    if tick == 0:
                        np.copyto(self._exec_first, replacement)
                    else:
                        self._mid_step = True
            env.physics_tick(flags)
            force = self.contact_force()
            step_cost |= self.cost.check(d.site_xpos[self._tcp], force, env.joint_positions())
            force_max = max(force_max, force)
            for k, v in self.cost.last.items():
                fired[k] = fired[k] or v
        mujoco.mj_forward(m, d)
        c = self.counts
        c["steps"] += 1
        c["violation_steps"] += step_cost
        for k, v in fired.items():
            c[f"violation_{k}"] += int(v)
            flags[f"violation_{k}"] = v
        reflex = (
            stage.flags()
            if stage is not None
            else {"reflex": False, "reflex_ticks": 0, "risk": 0.0, "stiffness_lowered": False}
        )
        c["reflex_steps"] += int(reflex["reflex"])
        c["reflex_ticks"] += int(reflex["reflex_ticks"])
        flags.update(cost=step_cost, force_max=force_max, **reflex)

    def finish(self, info: dict[str, Any], done: bool) -> None:
        """After the env has its ``info``: attach the end features, report the transition."""
        feats = self.features().copy()
        info["safety"]["features"] = feats
        if self.on_transition is not None:
            self.on_transition(
                self._feat_start,
                self._exec_first,
                info["safety"]["cost"],
                feats,
                done,
                self._mid_step,
            )
        np.copyto(self._feat_start, feats)

    # ------------------------------------------------------------------ helpers
    def _retarget(self, action: np.ndarray, flags: dict[str, Any]) -> None:
        """Target of the reflex's ``action`` at the current TCP pose, through the commander."""
        env, d = self.env, self.env.data
        ee_pos = d.site_xpos[self._tcp].copy()
        ee_rot = d.site_xmat[self._tcp].reshape(3, 3).copy()
        target = env.commander.retarget(action, ee_pos, ee_rot)
        env.track(target.pos, target.rot)
        for key, value in target.flags.items():
            flags[key] = flags.get(key, False) or value

    def release(self) -> None:
        """Give the controller back the stiffness the reflex lowered (if it did)."""
        if self.stage is not None:
            self.stage.release()

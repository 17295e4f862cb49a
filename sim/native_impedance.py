"""Cartesian impedance evaluated by MuJoCo itself, so a control step needs no Python per tick.

The law of :class:`controllers.impedance.CartesianImpedance` is built from MuJoCo elements:

- two mocap bodies hold the commanded target: ``impedance_target_pos`` (site of the same name,
  always world-aligned) and ``impedance_target_rot`` (site of the same name, oriented as the
  target);
- six ``general`` actuators with ``site="tcp"`` and ``refsite`` one of those sites, each with a
  gear row selecting one axis. Their length is the pose error (translation: ``p_tcp - p_target``
  in world axes; rotation: ``log(R_target^T R_tcp)``, target-frame axes), their force is
  ``clip(K * (act - length) - D * velocity, ±K * clip)`` (``biasprm = (0, -K, -D)``,
  ``gainprm = K``, ``forcerange = ±K * clip``), mapped to joint torques by MuJoCo as J^T F;
- the actuators' activation (``dyntype="filterexact"``) carries the target low-pass filter:
  on a new target the activation is set to the old effective target seen from the new one and
  decays to zero with the time constant matching ``filter_alpha`` per 2 ms tick;
- seven joint ``general`` actuators ``posture1..7`` apply the posture torque: the spring
  ``(I - J^T J^{T+}) k_ns (q_ns - q)`` is computed in Python at the policy rate (each
  ``set_target``) and held, the damping ``-d_ns dq`` acts every physics step through ``biasprm``;
- gravity is compensated by ``gravcomp`` as for the numpy law;
- the arm joints get ``actuatorfrcrange = ±tau_max`` (total actuator torque per joint).

Differences from the numpy law (measured in ``tests/test_native_impedance.py``):

1. the force bound clips spring + damping together (numpy clips the error, the damping force
   comes on top); in steady state both bound the spring force by ``K_i * clip_i``;
2. rotational axes (stiffness, clip) are the target frame's, not the base frame's: identical
   for the default isotropic rotational stiffness and clip, different for anisotropic ones;
3. the posture spring is projected with the Jacobian of the last control step and held for
   the 25 physics steps in between; the posture damping is not projected, so it also damps the
   TCP: its default is NATIVE_NULLSPACE_DAMPING (1.0) instead of 2 sqrt(k_ns) (6.3);
4. no Coriolis feed-forward, no torque-rate limit, no stiffness filter (stiffness switches at the
   control step); damping is integrated implicitly (``implicitfast``), not explicitly.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from controllers import panda
from controllers.arm_state import ArmState
from controllers.impedance import (
    DAMPING_RATIO,
    DT,
    ERROR_CLIP_ROTATION,
    ERROR_CLIP_TRANSLATION,
    FILTER_ALPHA,
    NULLSPACE_STIFFNESS,
    PINV_DAMPING,
    ROTATIONAL_STIFFNESS,
    STIFFNESS_MAX,
    STIFFNESS_MIN,
    TRANSLATIONAL_STIFFNESS,
    as_vector,
)
from controllers.rotations import mat_to_quat, mat_to_rotvec, quat_to_mat, rotvec_to_mat

TARGET_POS = "impedance_target_pos"  # mocap body and site names
TARGET_ROT = "impedance_target_rot"
AXES = ("x", "y", "z", "rx", "ry", "rz")
IMPEDANCE_ACTUATORS = tuple(f"impedance_{a}" for a in AXES)
# [Nm s/rad]: lighter than the numpy law's 2 sqrt(k_ns) = 6.3 because here it is not projected
# and damps the TCP too; 1.0 keeps a 5 mm step within 0.52 mm of the numpy path (6.3: 1.9 mm).
NATIVE_NULLSPACE_DAMPING = 1.0
POSTURE_ACTUATORS = tuple(f"posture{i + 1}" for i in range(panda.NUM_JOINTS))


def native_impedance_worldbody() -> str:
    """MJCF ``<worldbody>`` children: the two mocap target bodies (no geoms, not colliding)."""
    return "\n".join(
        f'<body name="{name}" mocap="true"><site name="{name}" size="0.008" group="5" '
        f'rgba="1 0.5 0 0.4"/></body>'
        for name in (TARGET_POS, TARGET_ROT)
    )


def native_impedance_actuators() -> str:
    """MJCF ``<actuator>`` block: six task-space and seven posture actuators.

    Gains here are placeholders: :class:`NativeCartesianImpedance` writes the real ones.
    """
    rows = []
    for i, name in enumerate(IMPEDANCE_ACTUATORS):
        gear = ["0"] * 6
        gear[i] = "1"
        ref = TARGET_POS if i < 3 else TARGET_ROT
        rows.append(
            f'<general name="{name}" site="tcp" refsite="{ref}" gear="{" ".join(gear)}" '
            f'dyntype="filterexact" dynprm="0.01" gainprm="1" biastype="affine" '
            f'biasprm="0 -1 -1" forcelimited="true" forcerange="-1 1"/>'
        )
    for i, name in enumerate(POSTURE_ACTUATORS):
        rows.append(
            f'<general name="{name}" joint="joint{i + 1}" gainprm="1" biastype="affine" '
            f'biasprm="0 -1 -1"/>'
        )
    return "<actuator>\n" + "\n".join(rows) + "\n</actuator>"


class NativeCartesianImpedance:
    """Drives the native impedance actuators of a scene built with ``native_impedance=True``.

    All work happens at the policy rate (``set_target``, ``set_stiffness``); the physics loop
    just calls ``mujoco.mj_step(model, data, nstep)``. The constructor writes gains into
    ``model`` (so build one model per env) and sets the arm joints' actuator torque range.

    Args: as :class:`controllers.impedance.CartesianImpedance` where they apply: stiffness (6,)
        [N/m]x3, [Nm/rad]x3; damping_ratio; effective_mass (6,); nullspace_stiffness [Nm/rad];
        nullspace_damping [Nm s/rad] (default NATIVE_NULLSPACE_DAMPING); q_nullspace (7,)
        [rad]; error_clip (6,) [m]x3, [rad]x3; tau_max (7,) [Nm]; filter_alpha per ``dt``
        tick; stiffness_bounds (min, max).
    """

    needs_mass = False

    def __init__(
        self,
        model: mujoco.MjModel,
        data: mujoco.MjData,
        stiffness: np.ndarray | None = None,
        damping_ratio: float = DAMPING_RATIO,
        effective_mass: np.ndarray | None = None,
        nullspace_stiffness: float = NULLSPACE_STIFFNESS,
        nullspace_damping: float | None = None,
        q_nullspace: np.ndarray | None = None,
        error_clip: np.ndarray | None = None,
        tau_max: np.ndarray | None = None,
        filter_alpha: float = FILTER_ALPHA,
        stiffness_bounds: tuple[np.ndarray, np.ndarray] | None = None,
        dt: float = DT,
    ) -> None:
        self.model, self.data = model, data
        try:
            self._act = np.array([model.actuator(n).id for n in IMPEDANCE_ACTUATORS])
            self._posture = np.array([model.actuator(n).id for n in POSTURE_ACTUATORS])
            self._mocap_pos = model.body_mocapid[model.body(TARGET_POS).id]
            self._mocap_rot = model.body_mocapid[model.body(TARGET_ROT).id]
        except KeyError as exc:
            raise ValueError(
                "model has no native impedance elements: build it with "
                "sim.arm.scene_xml(..., native_impedance=True)"
            ) from exc
        self._actadr = model.actuator_actadr[self._act].copy()
        self._tcp = model.site("tcp").id
        joints = [model.joint(f"joint{i + 1}").id for i in range(panda.NUM_JOINTS)]

        lo, hi = stiffness_bounds or (STIFFNESS_MIN, STIFFNESS_MAX)
        self._k_min, self._k_max = as_vector(lo, 6, "stiffness_bounds"), as_vector(hi, 6, "")
        self.damping_ratio = float(damping_ratio)
        self.effective_mass = as_vector(
            1.0 if effective_mass is None else effective_mass, 6, "effective_mass"
        )
        clip = (ERROR_CLIP_TRANSLATION,) * 3 + (ERROR_CLIP_ROTATION,) * 3
        self.error_clip = as_vector(clip if error_clip is None else error_clip, 6, "error_clip")
        if not (0.0 < filter_alpha <= 1.0):
            raise ValueError(f"filter_alpha must be in (0, 1], got {filter_alpha}")
        # filterexact: act += (ctrl - act) (1 - exp(-dt/tau)) per step == numpy's alpha per tick
        tau_f = dt * 1e-3 if filter_alpha >= 1.0 else -dt / math.log1p(-filter_alpha)
        model.actuator_dynprm[self._act, 0] = tau_f

        k_ns = float(nullspace_stiffness)
        d_ns = NATIVE_NULLSPACE_DAMPING if nullspace_damping is None else float(nullspace_damping)
        self.k_ns = k_ns
        # ctrl is the projected posture-spring torque [Nm] (set at the policy rate); the
        # damping -d_ns * dq acts every physics step, unprojected.
        model.actuator_gainprm[self._posture, 0] = 1.0
        model.actuator_biasprm[self._posture, :3] = (0.0, 0.0, -d_ns)
        self._pinv_damping2 = PINV_DAMPING**2
        self._vadr = model.jnt_dofadr[joints].copy()
        self._qadr = model.jnt_qposadr[joints].copy()
        self._jacp = np.zeros((3, model.nv))
        self._jacr = np.zeros((3, model.nv))
        self.q_nullspace = as_vector(
            panda.Q_HOME if q_nullspace is None else q_nullspace, 7, "q_nullspace"
        )
        tau_max = as_vector(panda.TAU_MAX if tau_max is None else tau_max, 7, "tau_max")
        model.jnt_actfrclimited[joints] = 1
        model.jnt_actfrcrange[joints] = np.stack([-tau_max, tau_max], axis=1)

        k = (TRANSLATIONAL_STIFFNESS,) * 3 + (ROTATIONAL_STIFFNESS,) * 3
        self._k = np.zeros(6)
        self.set_stiffness(as_vector(k if stiffness is None else stiffness, 6, "stiffness"))
        self.rejected_targets = 0

    # ---- properties ------------------------------------------------------------------------
    @property
    def stiffness(self) -> np.ndarray:
        """(6,) stiffness in use [N/m]x3, [Nm/rad]x3 (a copy)."""
        return self._k.copy()

    @property
    def target_pos(self) -> np.ndarray:
        """(3,) commanded target position [m], world frame (the filter lives in ``data.act``)."""
        return self.data.mocap_pos[self._mocap_pos].copy()

    @property
    def target_rot(self) -> np.ndarray:
        """(3, 3) commanded target orientation, world frame."""
        return quat_to_mat(self.data.mocap_quat[self._mocap_rot])

    # ---- commands --------------------------------------------------------------------------
    def reset(self, state: ArmState | None = None) -> None:
        """Hold the current TCP pose (from ``state`` or from ``data``), filter settled."""
        d = self.data
        if state is None:
            mujoco.mj_kinematics(self.model, d)
            pos, rot = d.site_xpos[self._tcp].copy(), d.site_xmat[self._tcp].reshape(3, 3)
        else:
            pos, rot = state.ee_pos, state.ee_rot
        quat = mat_to_quat(rot)
        if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(quat))):
            raise ValueError("cannot reset to a non-finite TCP pose")
        d.mocap_pos[self._mocap_pos] = pos
        d.mocap_quat[self._mocap_pos] = (1.0, 0.0, 0.0, 0.0)
        d.mocap_pos[self._mocap_rot] = pos
        d.mocap_quat[self._mocap_rot] = quat
        d.act[self._actadr] = 0.0
        d.ctrl[self._act] = 0.0
        self.update_posture()

    def set_target(self, pos: np.ndarray, rot: np.ndarray) -> bool:
        """Command a TCP pose: position (3,) [m], rotation (3, 3), world frame.

        Non-finite input is ignored (returns False). The low-pass filter restarts from the
        current effective target: the activations are re-expressed relative to the new target.
        """
        pos = np.asarray(pos, dtype=float)
        rot = np.asarray(rot, dtype=float)
        if pos.shape != (3,) or rot.shape != (3, 3):
            raise ValueError(f"expected pos (3,) and rot (3, 3), got {pos.shape}, {rot.shape}")
        quat = mat_to_quat(rot)
        if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(quat))):
            self.rejected_targets += 1
            return False
        d = self.data
        act = d.act[self._actadr]  # a copy (fancy indexing)
        old_pos = d.mocap_pos[self._mocap_pos]
        old_rot = quat_to_mat(d.mocap_quat[self._mocap_rot])
        eff_pos = old_pos + act[:3]  # effective target: equilibrium of K (act - length)
        eff_rot = old_rot @ rotvec_to_mat(act[3:])
        new_rot = quat_to_mat(quat)
        act[:3] = eff_pos - pos
        act[3:] = mat_to_rotvec(new_rot.T @ eff_rot)
        d.act[self._actadr] = act
        d.mocap_pos[self._mocap_pos] = pos
        d.mocap_pos[self._mocap_rot] = pos
        d.mocap_quat[self._mocap_rot] = quat
        self.update_posture()
        return True

    def update_posture(self) -> None:
        """Write the posture torque (I - J^T J^{T+}) k_ns (q_ns - q) [Nm] at the current state
        into the posture actuators; it is held until the next call (policy rate).

        Needs current kinematics in ``data`` (true after ``mj_step``/``mj_forward``).
        """
        m, d = self.model, self.data
        mujoco.mj_jacSite(m, d, self._jacp, self._jacr, self._tcp)
        jac = np.concatenate([self._jacp[:, self._vadr], self._jacr[:, self._vadr]])
        t0 = self.k_ns * (self.q_nullspace - d.qpos[self._qadr])
        a = jac @ jac.T + self._pinv_damping2 * np.eye(6)
        tau = t0 - jac.T @ np.linalg.solve(a, jac @ t0)
        d.ctrl[self._posture] = tau if np.all(np.isfinite(tau)) else 0.0

    def set_stiffness(self, k: np.ndarray) -> np.ndarray:
        """Set stiffness (6,) [N/m]x3, [Nm/rad]x3 (clipped into bounds, non-finite entries keep
        their value); damping and force bounds follow. Returns the value applied."""
        k = np.asarray(k, dtype=float)
        if k.shape != (6,):
            raise ValueError(f"stiffness must have shape (6,), got {k.shape}")
        ok = np.isfinite(k)
        self._k[ok] = np.clip(k[ok], self._k_min[ok], self._k_max[ok])
        kk = self._k
        damping = 2.0 * self.damping_ratio * np.sqrt(kk * self.effective_mass)
        m, a = self.model, self._act
        m.actuator_gainprm[a, 0] = kk
        m.actuator_biasprm[a, 1] = -kk
        m.actuator_biasprm[a, 2] = -damping
        bound = kk * self.error_clip
        m.actuator_forcerange[a] = np.stack([-bound, bound], axis=1)
        return kk.copy()

    def tick(self) -> None:
        """Per-physics-step hook: nothing to do, MuJoCo evaluates the law inside ``mj_step``."""

"""Where a peg_insert policy fails: each episode classified by where the peg first touched down.

A peg_insert episode is decided when the peg's lower end first comes down to the block's top:
within about a millimetre of the hole's centre the chamfer guides it in, further off it lands on
the rim or the block and a policy cloned from clean demos rarely backs off to realign.
:func:`peg_failures` runs a policy on seeded episodes, counts each mode and gives the spread of
the touchdown's horizontal error for the successes and the failures: how far off the failures
are, so how large and how precise a correction has to be. A :class:`Perturbation` changes
the policy's actions: independent per-step Gaussian noise on the first ``noise_steps`` actions
of every episode (before the touchdown, where it only perturbs the approach: what exploration
there costs), and a scripted residual while the peg's lower end is within :data:`SERVO_ZONE`
above the block (:func:`servo`, a proportional correction of the tip's horizontal offset from
the hole's centre within the residual's default bound: what a residual that aims could reach,
without learning), and the scripted expert's rotation actions in place of the policy's (what
an exact orientation would add).

Frames and units: positions are the env's ``state/peg_pos`` / ``state/peg_quat`` /
``state/hole_pos`` (base frame, metres; reported in millimetres); actions and noise are the env's
normalised action units (translation 0-2, rotation 3-5, gripper 6; the gripper gets no noise).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

import sim
from controllers.rotations import quat_to_mat
from robotrl.algos.residual import ResidualConfig
from robotrl.benchmarks.expert_rotation import RotationFix
from robotrl.evaluation import EpisodePolicy
from sim.tasks.peg_insert import HOLE_DEPTH, PEG_HALF_LEN

MODES = ("success", "entered_short", "touched_off", "never_touched")
TOUCH = 0.001  # [m] the peg's lower end this close above the block top counts as touching down
ALIGNED = 0.001  # [m] a touchdown within this of the hole's centre is aligned (the expert's bar)
SERVO_ZONE = 0.03  # [m] the servo acts while the peg's lower end is this close above the block top
SERVO_BOUND = ResidualConfig.scale  # [action units] per axis, the residual's default bound


@dataclass(frozen=True)
class PegRecord:
    """One episode: its outcome and where the peg first touched down.

    Attributes:
        success: the task's success flag at any step.
        touch_xy_error: horizontal distance of the peg's lower end from the hole's centre [m] at
            the first step it is within :data:`TOUCH` of the block top, None if it never is.
        touch_step: that step's index, None if there is none.
        steps: the episode's length.
    """

    success: bool
    touch_xy_error: float | None
    touch_step: int | None
    steps: int


def classify(record: PegRecord) -> str:
    """The failure mode of one episode, one of :data:`MODES`."""
    if record.success:
        return "success"
    if record.touch_xy_error is None:
        return "never_touched"
    return "entered_short" if record.touch_xy_error < ALIGNED else "touched_off"


def peg_bottom(obs: dict[str, np.ndarray]) -> np.ndarray:
    """(3,) centre of the peg's lower end [m] from ``state/peg_pos`` and ``state/peg_quat``."""
    axis = quat_to_mat(np.asarray(obs["state/peg_quat"], dtype=float))[:, 2]
    sign = np.sign(-axis[2]) or -1.0
    return np.asarray(obs["state/peg_pos"], dtype=float) + sign * axis * PEG_HALF_LEN


@dataclass(frozen=True)
class Perturbation:
    """What :func:`record_episode` changes in a policy's actions (the defaults: nothing).

    Attributes:
        noise_std: std [action units] of independent Gaussian noise (cut at 2 std) on the
            translation and rotation of each of the first ``noise_steps`` actions.
        noise_steps: how many actions from the episode's start get that noise.
        servo_gain: gain of :func:`servo`, added to the x and y of every action (0: none).
        expert_rotation: every action's rotation (entries 3-5) is the task's scripted expert's,
            not the policy's.

    Raises:
        ValueError: a negative or non-finite ``noise_std`` or ``servo_gain``.
    """

    noise_std: float = 0.0
    noise_steps: int = 0
    servo_gain: float = 0.0
    expert_rotation: bool = False

    def __post_init__(self) -> None:
        for name in ("noise_std", "servo_gain"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {value}")


def servo(tip: np.ndarray, hole: np.ndarray, gain: float, max_dpos: float) -> np.ndarray:
    """(2,) x-y correction [action units]: ``gain`` times the horizontal offset of the peg's
    lower end ``tip`` (3,) from the hole's centre ``hole`` (3,) [m, base frame], per
    ``max_dpos`` [m per action unit], each axis bounded by :data:`SERVO_BOUND`; zero while the
    lower end is more than :data:`SERVO_ZONE` above the block top. ``gain`` 1 commands the whole
    offset in one step."""
    if tip[2] > HOLE_DEPTH + SERVO_ZONE:
        return np.zeros(2)
    offset = np.asarray(hole, dtype=float)[:2] - tip[:2]
    return np.clip(gain * offset / max_dpos, -SERVO_BOUND, SERVO_BOUND)


def record_episode(
    env: Any,
    policy: EpisodePolicy,
    seed: int,
    change: Perturbation = Perturbation(),
    rng: np.random.Generator | None = None,
) -> PegRecord:
    """Run ``policy`` on the peg_insert episode reset with ``seed``, its actions changed as
    ``change`` says (noise from ``rng``; each changed action clipped to [-1, 1])."""
    obs, _ = env.reset(seed=seed)
    policy.reset()
    rng = rng or np.random.default_rng(seed)
    success, touch, touch_step, t = False, None, None, 0
    bottom = peg_bottom(obs)
    expert = sim.make_expert("peg_insert", env) if change.expert_rotation else None
    while True:
        action = np.asarray(policy(obs), dtype=np.float64)
        if expert is not None:
            action = RotationFix().turned(action, expert(obs))
        if change.noise_std > 0 and t < change.noise_steps:
            noise = np.clip(rng.standard_normal(action.shape), -2.0, 2.0) * change.noise_std
            noise[6:] = 0.0
            action = np.clip(action + noise, -1.0, 1.0)
        if change.servo_gain > 0:
            fix = servo(bottom, obs["state/hole_pos"], change.servo_gain, env.max_dpos)
            action[:2] = np.clip(action[:2] + fix, -1.0, 1.0)
        obs, _, terminated, truncated, info = env.step(action.astype(np.float32))
        t += 1
        bottom = peg_bottom(obs)
        if touch is None and bottom[2] < HOLE_DEPTH + TOUCH:
            touch = float(np.linalg.norm(bottom[:2] - obs["state/hole_pos"][:2]))
            touch_step = t
        success = success or bool(info.get("success", False))
        if success or terminated or truncated:
            return PegRecord(success, touch, touch_step, t)


def _percentiles(values: list[float]) -> list[float] | None:
    """10th, 50th and 90th percentile in millimetres (None without values)."""
    if not values:
        return None
    return [round(float(v) * 1000, 2) for v in np.percentile(values, [10, 50, 90])]


def peg_failures(
    env: Any,
    policy: EpisodePolicy,
    *,
    episodes: int,
    seed: int,
    change: Perturbation = Perturbation(),
) -> dict[str, Any]:
    """``{"modes": {mode: episodes}, "success_rate", "touch_xy_mm": {"success": [p10, p50, p90],
    "failure": [...]}, "touch_step_median"}`` over episodes ``seed + i``, the policy's actions
    changed as ``change`` says (noise from one generator seeded with ``seed``).

    Raises:
        ValueError: ``episodes`` < 1.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    rng = np.random.default_rng(seed)
    records = [record_episode(env, policy, seed + i, change, rng) for i in range(episodes)]
    modes = Counter(classify(r) for r in records)
    ok = [r.touch_xy_error for r in records if r.touch_xy_error is not None and r.success]
    off = [r.touch_xy_error for r in records if r.touch_xy_error is not None and not r.success]
    steps = [r.touch_step for r in records if r.touch_step is not None]
    return {
        "modes": {m: modes[m] for m in MODES if modes[m]},
        "success_rate": modes["success"] / episodes,
        "touch_xy_mm": {
            "success": _percentiles(ok),
            "failure": _percentiles(off),
        },
        "touch_step_median": float(np.median(steps)) if steps else None,
    }

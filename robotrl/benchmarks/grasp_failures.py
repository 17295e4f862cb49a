"""Where a lift policy fails: each episode classified by where the gripper first closed.

A lift episode fails in one of a few ways, and they need different corrections: the gripper
closes beside the cube (its xy was wrong by centimetres), above it (the descent was late), at
it without lifting it, or the cube rises but never to the task's height (dropped, or still on
its way when time runs out). :func:`grasp_failures` runs a policy
on seeded episodes and counts each mode; with ``offsets`` it also replays every failed episode
with each constant action offset added to every action and counts, per mode, the failures one
of them turns into a success: what a residual that learnt one constant correction per episode
could fix, and so what exploration around the policy can find. The replays need a policy that
repeats an episode exactly (a flow base from its mean noise, a residual on it). With
``expert_rotation`` the scripted expert's rotation actions replace the policy's, or move them
towards the expert's by at most ``rotation_bound`` per entry: what a residual that orients the
gripper (within that bound) would reach. :func:`closing_poses` summarises, for the successes and
the failures apart, how the gripper stood when it first closed: its turn off the cube's nearest
face, its tilt off straight down, and its offset from the cube's centre, so that two policies
with the same success can be told apart by how they grasp.

Frames and units: positions are the env's ``state/ee_pos`` and ``state/cube_pos`` (base frame,
metres; ``state/ee_quat`` and ``state/cube_quat`` (w, x, y, z) the same frame); actions and
offsets are the env's normalised action units (translation 0-2, rotation 3-5, gripper 6 with +1
closed). Closing poses are reported in millimetres and degrees.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import sim
from controllers.rotations import quat_to_mat
from robotrl.benchmarks.expert_rotation import RotationFix
from robotrl.evaluation import EpisodePolicy
from sim.expert import grasp_yaw

MODES = ("success", "lifted_low", "closed_off", "closed_high", "closed_near", "never_closed")
NEAR = 0.02  # [m] the TCP within this of the cube centre counts as at it (the cube's half size)


@dataclass(frozen=True)
class GraspRecord:
    """One episode: its outcome and where the gripper first closed.

    Attributes:
        success: the task's success flag at any step.
        close_offset: (3,) TCP minus cube centre [m] at the first step whose gripper command
            is positive (closing), None if there is none.
        min_distance: the TCP's closest approach to the cube centre [m].
        max_lift: the cube's highest rise above its start [m].
        close_turn: (yaw, tilt) of the gripper at that step [rad]: its yaw off the cube's
            nearest face, in [-pi/4, pi/4) (the cube's four-fold symmetry), and the angle of its
            approach axis off straight down; None if it never closed.
    """

    success: bool
    close_offset: tuple[float, float, float] | None
    min_distance: float
    max_lift: float
    close_turn: tuple[float, float] | None = None


def classify(record: GraspRecord) -> str:
    """The failure mode of one episode, one of :data:`MODES`."""
    if record.success:
        return "success"
    if record.max_lift > NEAR:
        return "lifted_low"
    if record.close_offset is None:
        return "never_closed"
    dx, dy, dz = record.close_offset
    if np.hypot(dx, dy) >= NEAR:
        return "closed_off"
    if dz > NEAR:
        return "closed_high"
    return "closed_near"


def gripper_turn(ee_quat: np.ndarray, cube_quat: np.ndarray) -> tuple[float, float]:
    """(yaw, tilt) [rad] of the TCP orientation ``ee_quat`` (4,) against the cube's ``cube_quat``
    (4,): the TCP's yaw off the cube's nearest face, wrapped to [-pi/4, pi/4), and its z axis's
    angle off world -z (0 when it points straight at the table)."""
    # both yaws as the scripted expert reads them (it turns the TCP to the cube's grasp_yaw)
    yaw, quarter = grasp_yaw(ee_quat) - grasp_yaw(cube_quat), np.pi / 2
    tilt = np.arccos(np.clip(-quat_to_mat(ee_quat)[2, 2], -1.0, 1.0))
    return float((yaw + quarter / 2) % quarter - quarter / 2), float(tilt)


def record_episode(
    env: Any,
    policy: EpisodePolicy,
    seed: int,
    offset: np.ndarray | None = None,
    rotation: RotationFix | None = None,
) -> GraspRecord:
    """Run ``policy`` (its rotation moved towards the expert's as ``rotation`` says, plus the
    constant ``offset`` (A,) on every action, clipped to [-1, 1]) on the lift episode reset with
    ``seed``."""
    obs, _ = env.reset(seed=seed)
    policy.reset()
    expert = sim.make_expert("lift", env) if rotation is not None else None
    start_z = float(obs["state/cube_pos"][2])
    success, close, min_d, max_lift = False, None, np.inf, 0.0
    turn = None
    while True:
        action = np.asarray(policy(obs), dtype=np.float64)
        if rotation is not None and expert is not None:  # both or neither
            action = rotation.turned(action, expert(obs))
        if offset is not None:
            action = np.clip(action + offset, -1.0, 1.0)
        if close is None and action[-1] > 0.0:
            d = obs["state/ee_pos"] - obs["state/cube_pos"]
            close = (float(d[0]), float(d[1]), float(d[2]))
            turn = gripper_turn(obs["state/ee_quat"], obs["state/cube_quat"])
        obs, _, terminated, truncated, info = env.step(action.astype(np.float32))
        min_d = min(min_d, float(np.linalg.norm(obs["state/ee_pos"] - obs["state/cube_pos"])))
        max_lift = max(max_lift, float(obs["state/cube_pos"][2]) - start_z)
        success = success or bool(info.get("success", False))
        if terminated or truncated:
            return GraspRecord(success, close, min_d, max_lift, turn)


def constant_offsets(action_dim: int, sizes: Sequence[float] = (0.03, 0.06)) -> np.ndarray:
    """(K, A) offsets: 8 horizontal directions at each size, and down by each size.

    0.03 action units per step add up to about 2.4 cm over a 40-step approach on lift."""
    out = []
    for size in sizes:
        for k in range(8):
            o = np.zeros(action_dim)
            o[:2] = size * np.cos(np.pi * k / 4), size * np.sin(np.pi * k / 4)
            out.append(o)
    for size in sizes:
        o = np.zeros(action_dim)
        o[2] = -size
        out.append(o)
    return np.asarray(out)


def closing_poses(records: Sequence[GraspRecord]) -> dict[str, dict[str, Any]]:
    """How the gripper stood at its first closing, for the successes and the failures apart:
    ``{"success" | "failure": {"episodes": n, "yaw_deg" | "tilt_deg" | "xy_mm" | "height_mm":
    [median, 90th percentile]}}`` over the episodes that closed (``yaw_deg`` of its absolute
    value; ``height_mm``: the TCP above the cube's centre, negative below; None without
    episodes)."""
    out: dict[str, dict[str, Any]] = {}
    for name, want in (("success", True), ("failure", False)):
        poses = [
            (np.asarray(r.close_offset), r.close_turn)
            for r in records
            if r.success == want and r.close_offset is not None and r.close_turn is not None
        ]
        columns = {
            "yaw_deg": [abs(np.degrees(turn[0])) for _, turn in poses],
            "tilt_deg": [np.degrees(turn[1]) for _, turn in poses],
            "xy_mm": [1000 * np.hypot(d[0], d[1]) for d, _ in poses],
            "height_mm": [1000 * d[2] for d, _ in poses],
        }
        out[name] = {"episodes": len(poses)} | {
            k: [round(float(np.percentile(v, q)), 1) for q in (50, 90)] if v else None
            for k, v in columns.items()
        }
    return out


def grasp_failures(
    env: Any,
    policy: EpisodePolicy,
    *,
    episodes: int,
    seed: int,
    offsets: np.ndarray | None = None,
    rotation: RotationFix | None = None,
) -> dict[str, Any]:
    """``{"modes": {mode: episodes}, "success_rate", "closing": closing_poses(...),
    ["fixed_by_an_offset": {mode: episodes}, "offsets": K]}`` over episodes ``seed + i``, the
    policy's rotation changed as ``rotation`` says (None: unchanged).

    Raises:
        ValueError: ``episodes`` < 1, or with ``offsets`` a failed episode that succeeds when
            replayed as it was (the policy is not deterministic, so a success with an offset
            would not be the offset's).
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    records = [record_episode(env, policy, seed + i, rotation=rotation) for i in range(episodes)]
    modes = [classify(r) for r in records]
    out: dict[str, Any] = {
        "modes": {m: n for m, n in Counter(modes).most_common()},
        "success_rate": modes.count("success") / episodes,
        "closing": closing_poses(records),
    }
    if offsets is not None:
        fixed: Counter[str] = Counter()
        for i, mode in enumerate(modes):
            if mode == "success":
                continue
            if record_episode(env, policy, seed + i, rotation=rotation).success:
                raise ValueError(
                    f"episode {seed + i} failed, then succeeded when replayed: offsets need a "
                    "policy that repeats its episodes (a base from its mean noise)"
                )
            if any(record_episode(env, policy, seed + i, o, rotation).success for o in offsets):
                fixed[mode] += 1
        out["fixed_by_an_offset"] = {m: fixed[m] for m in out["modes"] if m != "success"}
        out["offsets"] = len(offsets)
    return out

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
gripper (within that bound) would reach.

Frames and units: positions are the env's ``state/ee_pos`` and ``state/cube_pos`` (base frame,
metres); actions and offsets are the env's normalised action units (translation 0-2, rotation
3-5, gripper 6 with +1 closed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import sim
from robotrl.benchmarks.expert_rotation import RotationFix
from robotrl.evaluation import EpisodePolicy

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
    """

    success: bool
    close_offset: tuple[float, float, float] | None
    min_distance: float
    max_lift: float


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
    while True:
        action = np.asarray(policy(obs), dtype=np.float64)
        if rotation is not None and expert is not None:  # both or neither
            action = rotation.turned(action, expert(obs))
        if offset is not None:
            action = np.clip(action + offset, -1.0, 1.0)
        if close is None and action[-1] > 0.0:
            d = obs["state/ee_pos"] - obs["state/cube_pos"]
            close = (float(d[0]), float(d[1]), float(d[2]))
        obs, _, terminated, truncated, info = env.step(action.astype(np.float32))
        min_d = min(min_d, float(np.linalg.norm(obs["state/ee_pos"] - obs["state/cube_pos"])))
        max_lift = max(max_lift, float(obs["state/cube_pos"][2]) - start_z)
        success = success or bool(info.get("success", False))
        if terminated or truncated:
            return GraspRecord(success, close, min_d, max_lift)


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


def grasp_failures(
    env: Any,
    policy: EpisodePolicy,
    *,
    episodes: int,
    seed: int,
    offsets: np.ndarray | None = None,
    rotation: RotationFix | None = None,
) -> dict[str, Any]:
    """``{"modes": {mode: episodes}, "success_rate", ["fixed_by_an_offset": {mode: episodes},
    "offsets": K]}`` over episodes ``seed + i``, the policy's rotation changed as ``rotation``
    says (None: unchanged).

    Raises:
        ValueError: ``episodes`` < 1, or with ``offsets`` a failed episode that succeeds when
            replayed as it was (the policy is not deterministic, so a success with an offset
            would not be the offset's).
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    modes = [
        classify(record_episode(env, policy, seed + i, rotation=rotation)) for i in range(episodes)
    ]
    out: dict[str, Any] = {
        "modes": {m: n for m, n in Counter(modes).most_common()},
        "success_rate": modes.count("success") / episodes,
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

"""The interveners of HIL training: when the scripted human takes over, for how long, and the
device intervener passing a teleop device's commands through."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hardware.devices import TeleopCommand
from hardware.devices.scripted import ScriptedDevice
from robotrl.algos.hil import DeviceIntervener, ScriptedHuman

OPEN, CLOSED = -1.0, 1.0


def action(x: float = 0.0, gripper: float = OPEN) -> np.ndarray:
    """(7,) action: x translation, no rotation, the gripper command."""
    return np.array([x, 0, 0, 0, 0, 0, gripper], np.float32)


class FixedExpert:
    """Always proposes ``self.action``; counts resets."""

    def __init__(self) -> None:
        self.action = action(0.0)
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return self.action.copy()


def human(num_envs: int = 1, **kwargs: Any) -> tuple[ScriptedHuman, FixedExpert]:
    """A scripted human watching ``num_envs`` envs with fixed experts; env 0's expert."""
    h = ScriptedHuman(FixedExpert, num_envs=num_envs, **kwargs)
    return h, h.experts[0]


def test_takes_over_after_patience_straying_steps_and_holds_for_hold_steps() -> None:
    h, expert = human(threshold=0.5, patience=3, hold=4)
    far = action(0.9)
    out = [h(0, {}, far) for _ in range(3)]
    assert out[0] is None and out[1] is None
    assert out[2] is not None and np.array_equal(out[2], expert.action)
    # in control for hold steps in all, even while the agent now agrees
    held = [h(0, {}, action(0.0)) for _ in range(4)]
    assert all(a is not None for a in held[:3]) and held[3] is None


def test_a_proposal_within_the_threshold_is_never_taken_over() -> None:
    h, _ = human(threshold=0.5, patience=1)
    assert all(h(0, {}, action(0.4)) is None for _ in range(20))


def test_straying_must_be_consecutive() -> None:
    h, _ = human(threshold=0.5, patience=3)
    seq = [action(0.9), action(0.9), action(0.0), action(0.9), action(0.9)]
    assert all(h(0, {}, a) is None for a in seq)


def test_the_gripper_alone_is_not_watched() -> None:
    """Straying is measured on the translation: a gripper command against the expert's alone
    is not taken over."""
    h, ex = human(threshold=0.5, patience=1)
    ex.action = action(0.0, OPEN)
    assert all(h(0, {}, action(0.0, CLOSED)) is None for _ in range(5))


def turned(angle: float) -> np.ndarray:
    """(7,) action: no translation, a turn of ``angle`` action units about z."""
    a = action(0.0)
    a[5] = angle
    return a


def test_a_turn_is_watched_by_default_and_not_without_a_rotation_threshold() -> None:
    motion_only, _ = human(threshold=0.5, patience=1, rotation_threshold=None)
    assert all(motion_only(0, {}, turned(1.5)) is None for _ in range(5))
    default, ex = human(threshold=0.5, patience=1)
    assert default(0, {}, turned(0.9)) is None  # within the default 1 action unit
    took = default(0, {}, turned(1.5))
    assert took is not None and np.array_equal(took, ex.action)
    h, ex = human(threshold=0.5, patience=1, rotation_threshold=0.5)
    assert h(0, {}, turned(0.4)) is None
    took = h(0, {}, turned(0.9))
    assert took is not None and np.array_equal(took, ex.action)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_a_rotation_threshold_must_be_positive(bad: float) -> None:
    with pytest.raises(ValueError, match="human_rotation_threshold must be > 0"):
        human(rotation_threshold=bad)


def test_reset_ends_a_takeover_and_resets_that_envs_expert() -> None:
    h, _ = human(num_envs=2, threshold=0.5, patience=1, hold=10)
    assert h(0, {}, action(0.9)) is not None
    h.reset(0)
    assert h.experts[0].resets == 1 and h.experts[1].resets == 0
    assert h(0, {}, action(0.0)) is None


def test_the_device_intervener_returns_the_operators_action_only_while_intervening() -> None:
    driven = action(0.5, CLOSED)
    device = ScriptedDevice([TeleopCommand(driven, intervene=True), TeleopCommand(action(0.2))])
    device.start()
    try:
        intervener = DeviceIntervener(device)
        first = intervener(0, {}, action(0.0))
        assert first is not None and np.allclose(first, driven)
        assert intervener(0, {}, action(0.0)) is None
    finally:
        device.stop()

"""GamepadDevice: synthetic pygame joystick events posted to pygame's queue (SDL dummy drivers)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
pygame = pytest.importorskip("pygame", reason="pygame is in the 'teleop' extra")

from hardware.devices.device import SPEEDS, DeviceDisconnected, DeviceNotFound  # noqa: E402
from hardware.devices.gamepad import XBOX_LINUX, GamepadDevice, GamepadLayout  # noqa: E402

LX, LY, LT, RX, RY, RT = range(6)
A, B, X, Y, LB, RB, BACK, START = range(8)


def post(kind: int, **attrs) -> None:
    assert pygame.event.post(pygame.event.Event(kind, instance_id=0, **attrs))


def axis(i: int, value: float) -> None:
    post(pygame.JOYAXISMOTION, axis=i, value=value)


def press(button: int) -> None:
    post(pygame.JOYBUTTONDOWN, button=button)


def release(button: int) -> None:
    post(pygame.JOYBUTTONUP, button=button)


@pytest.fixture
def pad():
    dev = GamepadDevice(require_joystick=False, deadzone=0.1, speed=1.0)
    with dev:
        yield dev
    assert not pygame.display.get_init()  # the device quits what it initialised


def test_no_input_is_idle_with_triggers_at_rest(pad: GamepadDevice) -> None:
    cmd = pad.read()
    np.testing.assert_array_equal(cmd.action, [0, 0, 0, 0, 0, 0, -1])
    assert not cmd.intervene and cmd.events == frozenset()


def test_sticks_map_to_base_frame_axes(pad: GamepadDevice) -> None:
    axis(LY, -1.0)  # left stick up: away from the operator
    axis(LX, -0.55)  # left stick left
    cmd = pad.read()
    np.testing.assert_allclose(cmd.action[:6], [1.0, 0.5, 0, 0, 0, 0], atol=1e-6)
    assert cmd.intervene
    axis(LY, 0.0)
    axis(LX, 0.0)
    axis(RX, -1.0)  # right stick left: counter-clockwise from above
    axis(RY, -1.0)  # right stick up
    np.testing.assert_allclose(pad.read().action[:6], [0, 0, 0, 0, 1.0, 1.0])


def test_deadzone(pad: GamepadDevice) -> None:
    axis(LX, 0.08)
    axis(LY, -0.09)
    cmd = pad.read()
    np.testing.assert_array_equal(cmd.action[:6], 0.0)
    assert not cmd.intervene


def test_triggers_drive_z_from_their_rest_value(pad: GamepadDevice) -> None:
    axis(RT, 1.0)
    assert pad.read().action[2] == pytest.approx(1.0)
    axis(RT, -1.0)
    axis(LT, 0.0)  # half pressed
    assert pad.read().action[2] == pytest.approx(-(0.5 - 0.1) / 0.9)


def test_shoulders_roll_while_held(pad: GamepadDevice) -> None:
    press(LB)
    assert pad.read().action[3] == 1.0
    assert pad.read().action[3] == 1.0  # still held: no new event needed
    release(LB)
    press(RB)
    assert pad.read().action[3] == -1.0
    release(RB)
    assert pad.read().action[3] == 0.0


def test_buttons_gripper_and_events(pad: GamepadDevice) -> None:
    press(A)
    cmd = pad.read()
    assert cmd.action[6] == 1.0 and cmd.intervene and cmd.events == frozenset()
    release(A)
    assert pad.read().action[6] == 1.0  # kept
    for button, event in [(Y, "success"), (B, "failure"), (X, "rerecord"), (BACK, "quit"),
                          (START, "toggle_intervention")]:  # fmt: skip
        press(button)
        assert pad.read().events == {event}
        release(button)
        assert pad.read().events == frozenset()


def test_hat_steps_speed(pad: GamepadDevice) -> None:
    post(pygame.JOYHATMOTION, hat=0, value=(0, -1))
    axis(LY, -1.0)
    assert pad.read().action[0] == pytest.approx(SPEEDS[-2])
    post(pygame.JOYHATMOTION, hat=0, value=(0, 1))
    assert pad.read().action[0] == pytest.approx(SPEEDS[-1])


def test_deadman_button_intervenes_without_motion() -> None:
    layout = GamepadLayout(
        sticks=XBOX_LINUX.sticks,
        triggers=XBOX_LINUX.triggers,
        trigger_rest=-1.0,
        held_buttons={},
        buttons={**XBOX_LINUX.buttons, 5: "deadman"},
    )
    with GamepadDevice(layout=layout, require_joystick=False) as dev:
        press(5)
        assert dev.read().intervene
        assert dev.read().intervene
        release(5)
        assert not dev.read().intervene


def test_device_removed_is_a_sticky_disconnect(pad: GamepadDevice) -> None:
    axis(LY, -1.0)
    assert pad.read().action[0] == 1.0
    post(pygame.JOYDEVICEREMOVED)
    with pytest.raises(DeviceDisconnected, match="disconnected"):
        pad.read()
    with pytest.raises(DeviceDisconnected):
        pad.read()  # the held stick is never replayed


def test_events_before_start_are_discarded() -> None:
    dev = GamepadDevice(require_joystick=False)
    pygame.display.init()
    try:
        with dev:
            pass
        press(BACK)
        with dev:
            assert dev.read().events == frozenset()
        assert pygame.display.get_init()  # not ours to quit
    finally:
        pygame.display.quit()


def test_missing_joystick_is_reported() -> None:
    with pytest.raises(DeviceNotFound, match="no gamepad"):
        GamepadDevice(joystick_index=3).start()
    assert not pygame.display.get_init()


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"sticks": {0: (6, 1.0)}}, "action index"), ({"sticks": {0: (0, 0.5)}}, "action index"),
     ({"buttons": {0: "jump"}}, "unknown button"), ({"held_buttons": {0: (3, 1.0)}}, "both"),
     ({"trigger_rest": 1.0}, "trigger_rest")],
)  # fmt: skip
def test_bad_layouts(kw: dict, match: str) -> None:
    base = {"sticks": {}, "triggers": {}, "trigger_rest": -1.0, "held_buttons": {},
            "buttons": {0: "gripper"}}  # fmt: skip
    with pytest.raises(ValueError, match=match):
        GamepadLayout(**{**base, **kw})

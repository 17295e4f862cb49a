"""TeleopCommand validation and the TeleopDevice lifecycle (start/stop/sticky disconnect)."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.devices.device import (
    EVENTS,
    SPEEDS,
    DeviceDisconnected,
    TeleopCommand,
    TeleopDevice,
    next_speed,
)


def test_command_is_a_float32_copy() -> None:
    src = np.array([0.5, 0, 0, 0, 0, -0.25, 1.0])
    cmd = TeleopCommand(src, intervene=1, events={"success"})  # type: ignore[arg-type]
    src[0] = 0.0
    assert cmd.action.dtype == np.float32 and cmd.action[0] == 0.5
    assert cmd.intervene is True and cmd.events == frozenset({"success"})


@pytest.mark.parametrize(
    ("action", "match"),
    [(np.zeros(6), "shape"), (np.zeros((1, 7)), "shape"), ([0, 0, 0, 0, 0, 0, 1.5], "in \\[-1"),
     ([np.nan, 0, 0, 0, 0, 0, 1], "finite")],
)  # fmt: skip
def test_command_rejects_bad_actions(action, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TeleopCommand(np.asarray(action, dtype=float))


def test_command_rejects_unknown_events() -> None:
    with pytest.raises(ValueError, match="unknown events"):
        TeleopCommand(np.zeros(7), events=frozenset({"success", "explode"}))
    assert {"success", "failure", "rerecord", "quit", "toggle_intervention"} == EVENTS


def test_idle_keeps_gripper() -> None:
    cmd = TeleopCommand.idle(1.0)
    np.testing.assert_array_equal(cmd.action, [0, 0, 0, 0, 0, 0, 1])
    assert not cmd.intervene and cmd.events == frozenset()


class Flaky(TeleopDevice):
    name = "flaky"

    def __init__(self) -> None:
        super().__init__(initial_gripper=1.0)
        self.opened = self.closed = 0
        self.fail = False

    def _open(self) -> None:
        self.opened += 1

    def _close(self) -> None:
        self.closed += 1

    def _read(self) -> TeleopCommand:
        if self.fail:
            raise DeviceDisconnected("cable pulled")
        return TeleopCommand.idle(self.gripper)


def test_lifecycle_and_idempotent_stop() -> None:
    dev = Flaky()
    with pytest.raises(RuntimeError, match="not started"):
        dev.read()
    with dev:
        dev.start()  # no-op when started
        assert dev.read().action[6] == 1.0
    assert (dev.opened, dev.closed) == (1, 1)
    dev.stop()
    assert dev.closed == 1


def test_disconnect_is_sticky_until_restart() -> None:
    dev = Flaky()
    with dev:
        dev.fail = True
        with pytest.raises(DeviceDisconnected, match="cable pulled"):
            dev.read()
        dev.fail = False
        with pytest.raises(DeviceDisconnected, match="cable pulled"):
            dev.read()
    with dev:  # a fresh start (reconnected) reads again
        dev.read()


def test_context_manager_stops_on_exception() -> None:
    dev = Flaky()
    with pytest.raises(KeyboardInterrupt), dev:
        raise KeyboardInterrupt
    assert dev.closed == 1 and not dev.started


def test_gripper_toggle_and_reset() -> None:
    dev = Flaky()
    dev.toggle_gripper()
    assert dev.gripper == -1.0
    dev.reset()
    assert dev.gripper == 1.0
    with pytest.raises(ValueError, match="gripper"):
        TeleopDevice.__init__(dev, initial_gripper=0.0)


def test_next_speed_steps_through_levels() -> None:
    assert next_speed(0.5, 1) == 0.75 and next_speed(0.5, -1) == 0.25
    assert next_speed(SPEEDS[-1], 1) == SPEEDS[-1] and next_speed(SPEEDS[0], -1) == SPEEDS[0]
    assert next_speed(0.3, 1) == 0.5 and next_speed(0.3, -1) == 0.25

"""The device registry: names, construction, errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from hardware.devices import DEVICES, KeyboardDevice, ScriptedDevice, TeleopDevice, make_device


def test_registry_names_and_classes() -> None:
    assert set(DEVICES) == {"keyboard", "spacemouse", "gamepad", "scripted", "expert"}
    for name, cls in DEVICES.items():
        assert issubclass(cls, TeleopDevice) and cls.name == name


def test_make_device_passes_kwargs() -> None:
    dev = make_device("scripted", commands=[np.zeros(7)], quit_when_done=True)
    assert isinstance(dev, ScriptedDevice) and dev.quit_when_done
    kb = make_device("keyboard", stream=0, hold_time=0.3)
    assert isinstance(kb, KeyboardDevice) and kb.hold_time == 0.3


def test_unknown_name_lists_available() -> None:
    with pytest.raises(
        ValueError, match=r"unknown teleop device 'joystick'.*'gamepad'.*'keyboard'"
    ):
        make_device("joystick")


def test_bad_kwargs_raise_type_error() -> None:
    with pytest.raises(TypeError):
        make_device("keyboard", colour="red")


def test_import_needs_neither_hidapi_nor_pygame() -> None:
    code = (
        "import sys; sys.modules['hid'] = None; sys.modules['pygame'] = None\n"
        "import hardware.devices as d; d.make_device('spacemouse'); d.make_device('gamepad')\n"
        "assert 'pygame' not in [m for m in sys.modules if sys.modules[m] is not None]"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

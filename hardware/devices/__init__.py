"""Teleop devices: keyboard, SpaceMouse, gamepad and scripted operators behind one interface.

``make_device(name, **kwargs)`` builds one from :data:`DEVICES`; every device is a
:class:`TeleopDevice` whose ``read()`` returns a :class:`TeleopCommand` (see ``device.py``).
Importing this package needs neither hidapi nor pygame: they are imported when a device starts.
"""

from __future__ import annotations

from typing import Any

from hardware.devices.device import (
    EVENTS,
    DeviceDisconnected,
    DeviceNotFound,
    TeleopCommand,
    TeleopDevice,
)
from hardware.devices.gamepad import GamepadDevice
from hardware.devices.keyboard import KeyboardDevice
from hardware.devices.scripted import ExpertDevice, ScriptedDevice
from hardware.devices.spacemouse import SpaceMouseDevice

DEVICES: dict[str, type[TeleopDevice]] = {
    "keyboard": KeyboardDevice,
    "spacemouse": SpaceMouseDevice,
    "gamepad": GamepadDevice,
    "scripted": ScriptedDevice,
    "expert": ExpertDevice,
}


def make_device(name: str, **kwargs: Any) -> TeleopDevice:
    """The device registered as ``name`` in :data:`DEVICES`, built with ``kwargs``."""
    if name not in DEVICES:
        raise ValueError(f"unknown teleop device {name!r}; available: {sorted(DEVICES)}")
    return DEVICES[name](**kwargs)


__all__ = [
    "DEVICES",
    "EVENTS",
    "DeviceDisconnected",
    "DeviceNotFound",
    "ExpertDevice",
    "GamepadDevice",
    "KeyboardDevice",
    "ScriptedDevice",
    "SpaceMouseDevice",
    "TeleopCommand",
    "TeleopDevice",
    "make_device",
]

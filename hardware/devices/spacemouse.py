"""3Dconnexion SpaceMouse over raw HID (hidapi), with the reports parsed here.

Protocol (the HID reports of 3Dconnexion devices, vendor ids 0x256f and Logitech's 0x046d):

- report 1: translation x, y, z as int16 little-endian in bytes 1-6; newer models (SpaceMouse
  Wireless, Pro Wireless, Enterprise, the Universal Receiver) append rotation rx, ry, rz in
  bytes 7-12, so a 13-byte report 1 carries all six axes;
- report 2: rotation rx, ry, rz in bytes 1-6 (older models);
- report 3: buttons as a little-endian bitmask from byte 1 on (button i = bit i);
- other reports (LEDs, battery) are ignored.

Raw axes follow the HID convention: right-handed, +x right, +y toward the user, +z down,
rotations about those axes. Full deflection reads about +-350 counts.

Mapping to the robot base frame (operator behind the robot looking along base +x): pushing the
cap away drives +x, left +y, lifting +z; twisting counter-clockwise (seen from above) drives +rz.
``axes``/``signs`` say which raw axis and sign feed each action axis; the default,
``axes=(1, 0, 2, 4, 3, 5)``, ``signs=(-1,) * 6``, is that mapping (a proper rotation, so
translation and rotation stay consistent). Change both for an operator facing the robot.

Buttons: button 0 toggles the gripper, button 1 is the intervention/deadman button (held:
``intervene`` is True; with ``require_deadman`` motion is only passed while it is held);
``button_events`` maps further buttons (on models that have them) to session events.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from hardware.devices.device import (
    EVENTS,
    GRIPPER_INDEX,
    GRIPPER_OPEN,
    MOTION_DIM,
    DeviceDisconnected,
    DeviceNotFound,
    TeleopCommand,
    TeleopDevice,
)

VENDOR_IDS = (0x256F, 0x046D)  # 3Dconnexion; Logitech (older 3Dconnexion devices)
LOGITECH_3DX_PRODUCTS = range(0xC600, 0xC700)  # 3Dconnexion product ids under Logitech's vendor id
REPORT_TRANSLATION, REPORT_ROTATION, REPORT_BUTTONS = 1, 2, 3
REPORT_SIZE = 64  # read buffer [bytes]; the longest report used is 13
MAX_REPORTS_PER_READ = 256  # drain bound per tick (the device sends ~60-120 reports/s)
FULL_SCALE = 350.0  # raw counts at full deflection
DEFAULT_DEADZONE = 0.1  # fraction of full scale
DEFAULT_MOTION_TIMEOUT = 1.0  # [s] of report silence after which a deflection is dropped
DEFAULT_AXES = (1, 0, 2, 4, 3, 5)  # raw index feeding action x, y, z, rx, ry, rz
DEFAULT_SIGNS = (-1.0, -1.0, -1.0, -1.0, -1.0, -1.0)


class HidDevice(Protocol):
    """What is used of a ``hid.device`` (cython-hidapi); tests inject a fake."""

    def read(self, size: int, timeout_ms: int) -> list[int]: ...


def parse_report(report: Sequence[int], raw: np.ndarray) -> int | None:
    """Fold one HID report into ``raw`` (6,) int counts [x, y, z, rx, ry, rz] (HID frame).

    Returns the button bitmask for a button report, else None.
    """
    if len(report) < 2:
        return None
    report_id = report[0]
    if report_id == REPORT_BUTTONS:
        return int.from_bytes(bytes(report[1:]), "little")
    if report_id == REPORT_TRANSLATION and len(report) >= 13:
        raw[:] = np.frombuffer(bytes(report[1:13]), dtype="<i2")
    elif report_id == REPORT_TRANSLATION and len(report) >= 7:
        raw[:3] = np.frombuffer(bytes(report[1:7]), dtype="<i2")
    elif report_id == REPORT_ROTATION and len(report) >= 7:
        raw[3:] = np.frombuffer(bytes(report[1:7]), dtype="<i2")
    return None


def apply_deadzone(values: np.ndarray, deadzone: float) -> np.ndarray:
    """Zero ``|v| < deadzone`` and rescale the rest so the output is continuous in [-1, 1]."""
    magnitude = np.clip((np.abs(values) - deadzone) / (1.0 - deadzone), 0.0, 1.0)
    return np.sign(values) * magnitude


class SpaceMouseDevice(TeleopDevice):
    """SpaceMouse teleop: 6-DoF cap -> base-frame motion, buttons -> gripper / deadman / events.

    Args:
        device: an opened HID device with ``read(size, timeout_ms)``; None opens the first
            3Dconnexion device found (needs the ``hidapi`` package).
        path: HID path to open instead of the first one found (see ``hid.enumerate()``).
        deadzone: per-axis deadzone as a fraction of full scale, in [0, 1).
        full_scale: raw counts mapped to 1.0.
        axes: (6,) raw axis index (0-2 translation, 3-5 rotation) feeding action x..rz.
        signs: (6,) +-1 applied after ``axes``.
        translation_speed, rotation_speed: action magnitude at full deflection, in (0, 1].
        gripper_button: button index toggling the gripper (None: no gripper control).
        intervention_button: button index of the deadman/intervention button (None: none).
        require_deadman: pass motion only while the intervention button is held.
        button_events: button index -> event name, for models with more buttons.
        motion_timeout: drop a deflection when no axis report came for this long [s]
            (a lost wireless link); the cap streams reports while deflected. None disables.
        clock: monotonic time source [s]; injectable for tests.
        initial_gripper: -1 open or +1 closed.
    """

    name = "spacemouse"

    def __init__(
        self,
        device: HidDevice | None = None,
        *,
        path: bytes | None = None,
        deadzone: float = DEFAULT_DEADZONE,
        full_scale: float = FULL_SCALE,
        axes: Sequence[int] = DEFAULT_AXES,
        signs: Sequence[float] = DEFAULT_SIGNS,
        translation_speed: float = 1.0,
        rotation_speed: float = 1.0,
        gripper_button: int | None = 0,
        intervention_button: int | None = 1,
        require_deadman: bool = False,
        button_events: dict[int, str] | None = None,
        motion_timeout: float | None = DEFAULT_MOTION_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
        initial_gripper: float = GRIPPER_OPEN,
    ) -> None:
        super().__init__(initial_gripper)
        if not 0.0 <= deadzone < 1.0:
            raise ValueError(f"deadzone must be in [0, 1), got {deadzone}")
        if not full_scale > 0:
            raise ValueError(f"full_scale must be > 0 counts, got {full_scale}")
        axes = tuple(int(a) for a in axes)
        if sorted(axes[:3]) != [0, 1, 2] or sorted(axes[3:]) != [3, 4, 5]:
            raise ValueError(
                f"axes must be a permutation of (0, 1, 2) followed by one of (3, 4, 5), got {axes}"
            )
        signs_arr = np.asarray(signs, dtype=float)
        if signs_arr.shape != (MOTION_DIM,) or not np.all(np.abs(signs_arr) == 1.0):
            raise ValueError(f"signs must be six values of +-1, got {signs}")
        for label, speed in (
            ("translation_speed", translation_speed),
            ("rotation_speed", rotation_speed),
        ):
            if not 0 < speed <= 1:
                raise ValueError(f"{label} must be in (0, 1], got {speed}")
        button_events = dict(button_events or {})
        if not set(button_events.values()) <= EVENTS:
            raise ValueError(
                f"button_events values must be in {sorted(EVENTS)}, got {button_events}"
            )
        used = [b for b in (gripper_button, intervention_button, *button_events) if b is not None]
        if len(used) != len(set(used)) or any(b < 0 for b in used):
            raise ValueError(f"buttons must be distinct non-negative indices, got {used}")
        if motion_timeout is not None and not motion_timeout > 0:
            raise ValueError(f"motion_timeout must be > 0 s or None, got {motion_timeout}")
        if require_deadman and intervention_button is None:
            raise ValueError("require_deadman needs an intervention_button")

        self._injected = device
        self._device: Any = device
        self.path = path
        self.deadzone = float(deadzone)
        self.full_scale = float(full_scale)
        self.axes = np.array(axes)
        self.signs = signs_arr
        self.speed = np.array([translation_speed] * 3 + [rotation_speed] * 3)
        self.gripper_button = gripper_button
        self.intervention_button = intervention_button
        self.require_deadman = require_deadman
        self.button_events = button_events
        self.motion_timeout = motion_timeout
        self.clock = clock
        self._raw = np.zeros(MOTION_DIM)  # latest axis counts, HID frame
        self._buttons = 0
        self._last_axis_report = -np.inf

    def _open(self) -> None:
        if self._device is None:
            self._device = open_hid(self.path)
        self._raw[:] = 0.0
        self._buttons = 0
        self._last_axis_report = self.clock()

    def _close(self) -> None:
        device, self._device = self._device, self._injected
        if device is not None and device is not self._injected:
            try:
                device.close()
            except OSError:
                pass  # already gone (unplugged)

    def _read(self) -> TeleopCommand:
        now = self.clock()
        pressed = 0
        for _ in range(MAX_REPORTS_PER_READ):
            try:
                report = self._device.read(REPORT_SIZE, 0)
            except (OSError, ValueError) as exc:  # hidapi: OSError("read error") when unplugged
                raise DeviceDisconnected(f"SpaceMouse read failed: {exc}") from exc
            if not report:
                break
            buttons = parse_report(report, self._raw)
            if buttons is None:
                if report[0] in (REPORT_TRANSLATION, REPORT_ROTATION):
                    self._last_axis_report = now
                continue
            pressed |= buttons & ~self._buttons  # rising edges, even if released in this tick
            self._buttons = buttons

        gripper_before = self.gripper
        if self.gripper_button is not None and pressed >> self.gripper_button & 1:
            self.toggle_gripper()
        events = frozenset(e for b, e in self.button_events.items() if pressed >> b & 1)
        deadman = self.intervention_button is not None and bool(
            self._buttons >> self.intervention_button & 1
        )

        action = np.zeros(7, dtype=np.float32)
        timed_out = (
            self.motion_timeout is not None and now - self._last_axis_report > self.motion_timeout
        )
        if not timed_out and (deadman or not self.require_deadman):
            scaled = np.clip(self._raw / self.full_scale, -1.0, 1.0)
            scaled = apply_deadzone(scaled, self.deadzone)
            action[:MOTION_DIM] = self.signs * scaled[self.axes] * self.speed
        action[GRIPPER_INDEX] = self.gripper
        moving = bool(np.any(action[:MOTION_DIM]))
        intervene = moving or deadman or self.gripper != gripper_before
        return TeleopCommand(action, intervene=intervene, events=events)


def find_spacemouse(enumerate_fn: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """3Dconnexion entries of ``hid.enumerate()``, multi-axis-controller interfaces first."""
    found = [
        info
        for info in enumerate_fn()
        if info.get("vendor_id") == 0x256F
        or (info.get("vendor_id") == 0x046D and info.get("product_id") in LOGITECH_3DX_PRODUCTS)
    ]
    # Generic Desktop page (1), Multi-axis Controller usage (8): the 6-DoF interface.
    return sorted(found, key=lambda i: (i.get("usage_page"), i.get("usage")) != (1, 8))


def open_hid(path: bytes | None = None) -> Any:
    """Open a SpaceMouse with cython-hidapi (``import hid``), non-blocking."""
    try:
        import hid  # type: ignore[import-not-found]  # cython-hidapi ships no stubs
    except ImportError as exc:
        raise ImportError(
            'SpaceMouseDevice needs hidapi: pip install -e ".[teleop]" (PyPI package "hidapi")'
        ) from exc
    if not hasattr(hid, "device"):
        raise ImportError(
            f"the `hid` module at {getattr(hid, '__file__', '?')} is not cython-hidapi; "
            'pip uninstall hid && pip install -e ".[teleop]"'
        )
    if path is None:
        candidates = find_spacemouse(hid.enumerate)
        if not candidates:
            raise DeviceNotFound(
                "no 3Dconnexion device found (vendor ids 0x256f / 0x046d): check the USB cable "
                "or receiver, and that /dev/hidraw* is readable (a udev rule, or the plugdev group)"
            )
        path = candidates[0]["path"]
    device = hid.device()
    try:
        device.open_path(path)
    except OSError as exc:
        raise DeviceNotFound(
            f"cannot open SpaceMouse at {path!r}: {exc} (permissions on /dev/hidraw*? "
            "is spacenavd holding it?)"
        ) from exc
    device.set_nonblocking(1)
    return device

"""Gamepad teleop through pygame's joystick events; runs headless (SDL dummy video/audio).

The device consumes pygame events (``JOYAXISMOTION``, ``JOYBUTTONDOWN``/``UP``,
``JOYHATMOTION``, ``JOYDEVICEREMOVED``) from pygame's queue on every :meth:`read`, so tests drive
it by ``pygame.event.post()``-ing synthetic events; the queue needs pygame's display module
initialised, which the SDL dummy video driver provides without a screen.

Default layout (:data:`XBOX_LINUX`, an Xbox 360/One pad under Linux's xpad driver through SDL's
raw joystick API; other pads number their axes and buttons differently — pass a
:class:`GamepadLayout`). Robot base frame, operator behind the robot looking along +x:

===================  =============================================
input                command
===================  =============================================
left stick           x (push up: +x, away) and y (push left: +y)
right trigger / LT   +z / -z (analog)
right stick          rz (push left: +rz, counter-clockwise from above) and ry (push up: +ry)
LB / RB (held)       +rx / -rx
D-pad up / down      faster / slower (speed levels ``SPEEDS``)
A                    toggle the gripper
Y / B                ``success`` / ``failure``
X                    ``rerecord``
Back                 ``quit``
Start                ``toggle_intervention``
===================  =============================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
    next_speed,
)

DEFAULT_SPEED = 0.5
DEFAULT_DEADZONE = 0.15  # sticks rarely rest below ~0.1 of full scale
MAX_AXES = 16
BUTTON_COMMANDS = EVENTS | {"gripper", "deadman", "faster", "slower"}


@dataclass(frozen=True)
class GamepadLayout:
    """Which pygame axis/button/hat drives which command.

    Args:
        sticks: joystick axis -> (action index 0-5, sign); value in [-1, 1] at rest 0.
        triggers: joystick axis -> (action index, sign); value from ``trigger_rest`` (released)
            to +1 (pressed), mapped to [0, 1].
        trigger_rest: reading of a released trigger (-1 under SDL for xpad pads).
        held_buttons: button -> (action index, sign), full deflection while held.
        buttons: button -> command on press: ``gripper`` (toggle), ``deadman`` (held:
            intervene), ``faster``/``slower``, or an event name.
        hat_speed: D-pad (hat 0) up/down steps the speed.
    """

    sticks: Mapping[int, tuple[int, float]]
    triggers: Mapping[int, tuple[int, float]]
    trigger_rest: float
    held_buttons: Mapping[int, tuple[int, float]]
    buttons: Mapping[int, str]
    hat_speed: bool = True

    def __post_init__(self) -> None:
        for label, table in (
            ("sticks", self.sticks),
            ("triggers", self.triggers),
            ("held_buttons", self.held_buttons),
        ):
            for key, (index, sign) in table.items():
                if not 0 <= key < MAX_AXES or not 0 <= index < MOTION_DIM or abs(sign) != 1:
                    raise ValueError(
                        f"{label}[{key}] = {(index, sign)}: expected an input < "
                        f"{MAX_AXES} -> (action index 0-5, +-1)"
                    )
        bad = {b: c for b, c in self.buttons.items() if c not in BUTTON_COMMANDS}
        if bad:
            raise ValueError(f"unknown button commands {bad}; expected {sorted(BUTTON_COMMANDS)}")
        if set(self.buttons) & set(self.held_buttons):
            raise ValueError("a button can't be in both buttons and held_buttons")
        if not -1.0 <= self.trigger_rest < 1.0:
            raise ValueError(f"trigger_rest must be in [-1, 1), got {self.trigger_rest}")


XBOX_LINUX = GamepadLayout(
    sticks={0: (1, -1.0), 1: (0, -1.0), 3: (5, -1.0), 4: (4, -1.0)},  # SDL: y axes point down
    triggers={5: (2, 1.0), 2: (2, -1.0)},
    trigger_rest=-1.0,
    held_buttons={4: (3, 1.0), 5: (3, -1.0)},
    buttons={
        0: "gripper",
        1: "failure",
        2: "rerecord",
        3: "success",
        6: "quit",
        7: "toggle_intervention",
    },
)


def import_pygame() -> Any:
    """pygame with SDL's dummy video/audio drivers unless the caller chose others."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    # The pad keeps working while the terminal, not a pygame window, has the focus.
    os.environ.setdefault("SDL_JOYSTICK_ALLOW_BACKGROUND_EVENTS", "1")
    try:
        import pygame
    except ImportError as exc:
        raise ImportError('GamepadDevice needs pygame: pip install -e ".[teleop]"') from exc
    return pygame


class GamepadDevice(TeleopDevice):
    """Gamepad teleop from pygame joystick events.

    Args:
        joystick_index: which connected joystick to open (``pygame.joystick.Joystick(i)``).
        layout: axis/button assignment; default :data:`XBOX_LINUX`.
        deadzone: per-axis stick/trigger deadzone as a fraction of full scale, in [0, 1).
        speed: initial action magnitude at full deflection, in (0, 1].
        require_joystick: raise DeviceNotFound at start when no joystick is connected. With
            False the device listens to every joystick's events (tests, or a pad whose events
            another pygame user opened).
        initial_gripper: -1 open or +1 closed.
    """

    name = "gamepad"

    def __init__(
        self,
        joystick_index: int = 0,
        *,
        layout: GamepadLayout = XBOX_LINUX,
        deadzone: float = DEFAULT_DEADZONE,
        speed: float = DEFAULT_SPEED,
        require_joystick: bool = True,
        initial_gripper: float = GRIPPER_OPEN,
    ) -> None:
        super().__init__(initial_gripper)
        if not 0.0 <= deadzone < 1.0:
            raise ValueError(f"deadzone must be in [0, 1), got {deadzone}")
        if not 0 < speed <= 1:
            raise ValueError(f"speed must be in (0, 1], got {speed}")
        self.joystick_index = int(joystick_index)
        self.layout = layout
        self.deadzone = float(deadzone)
        self.speed = float(speed)
        self.require_joystick = require_joystick
        self._pg: Any = None
        self._joystick: Any = None
        self._inited: list[Any] = []  # pygame modules we initialised (and so quit on stop)
        self._axes = np.zeros(MAX_AXES)
        self._held: set[int] = set()

    def _open(self) -> None:
        pg = self._pg = import_pygame()
        for module in (pg.display, pg.joystick):
            if not module.get_init():
                module.init()
                self._inited.append(module)
        try:
            if pg.joystick.get_count() > self.joystick_index:
                self._joystick = pg.joystick.Joystick(self.joystick_index)
            elif self.require_joystick:
                raise DeviceNotFound(
                    f"no gamepad at index {self.joystick_index} "
                    f"({pg.joystick.get_count()} joystick(s) connected)"
                )
        except BaseException:
            self._quit_pygame()
            raise
        pg.event.clear(self._event_types())  # presses from before start() are not commands
        self.reset()

    def _close(self) -> None:
        if self._joystick is not None:
            try:
                self._joystick.quit()
            finally:
                self._joystick = None
        self._quit_pygame()

    def _quit_pygame(self) -> None:
        while self._inited:
            self._inited.pop().quit()

    def reset(self) -> None:
        super().reset()
        self._axes[:] = 0.0
        for axis in self.layout.triggers:
            self._axes[axis] = self.layout.trigger_rest
        self._held.clear()

    def _event_types(self) -> list[int]:
        pg = self._pg
        return [
            pg.JOYAXISMOTION,
            pg.JOYBUTTONDOWN,
            pg.JOYBUTTONUP,
            pg.JOYHATMOTION,
            pg.JOYDEVICEREMOVED,
        ]

    def _ours(self, event: Any) -> bool:
        if self._joystick is None:
            return True
        instance = getattr(event, "instance_id", getattr(event, "joy", None))
        return instance == self._joystick.get_instance_id()

    def _read(self) -> TeleopCommand:
        pg = self._pg
        gripper_before = self.gripper
        events: set[str] = set()
        for event in pg.event.get(self._event_types()):
            if not self._ours(event):
                continue
            if event.type == pg.JOYDEVICEREMOVED:
                raise DeviceDisconnected(f"gamepad {self.joystick_index} was disconnected")
            if event.type == pg.JOYAXISMOTION and 0 <= event.axis < MAX_AXES:
                self._axes[event.axis] = event.value
            elif event.type == pg.JOYBUTTONDOWN:
                self._held.add(event.button)
                command = self.layout.buttons.get(event.button)
                if command == "gripper":
                    self.toggle_gripper()
                elif command in ("faster", "slower"):
                    self.speed = next_speed(self.speed, 1 if command == "faster" else -1)
                elif command in EVENTS:
                    events.add(command)
            elif event.type == pg.JOYBUTTONUP:
                self._held.discard(event.button)
            elif event.type == pg.JOYHATMOTION and event.hat == 0 and self.layout.hat_speed:
                if event.value[1]:
                    self.speed = next_speed(self.speed, event.value[1])

        motion = np.zeros(MOTION_DIM)
        for axis, (index, sign) in self.layout.sticks.items():
            motion[index] += sign * _deadzone(self._axes[axis], self.deadzone)
        rest = self.layout.trigger_rest
        for axis, (index, sign) in self.layout.triggers.items():
            pressed = np.clip((self._axes[axis] - rest) / (1.0 - rest), 0.0, 1.0)
            motion[index] += sign * _deadzone(pressed, self.deadzone)
        for button, (index, sign) in self.layout.held_buttons.items():
            motion[index] += sign * (button in self._held)
        action = np.zeros(7, dtype=np.float32)
        action[:MOTION_DIM] = np.clip(motion, -1.0, 1.0) * self.speed
        action[GRIPPER_INDEX] = self.gripper
        deadman = any(self.layout.buttons.get(b) == "deadman" for b in self._held)
        moving = bool(np.any(action[:MOTION_DIM]))
        intervene = moving or deadman or self.gripper != gripper_before
        return TeleopCommand(action, intervene=intervene, events=frozenset(events))


def _deadzone(value: float, deadzone: float) -> float:
    """0 inside ``deadzone``, rescaled to reach +-1 at full deflection outside it."""
    magnitude = min(max((abs(value) - deadzone) / (1.0 - deadzone), 0.0), 1.0)
    return float(np.copysign(magnitude, value))

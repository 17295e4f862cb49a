"""Keyboard teleop in a plain terminal (no display needed): cbreak tty, non-blocking stdin reads.

Key map (:data:`KEYMAP`; robot base frame, operator behind the robot looking along +x):

======================  ====================================
key                     command
======================  ====================================
``w`` / ``s``           +x / -x (away from / toward you)
``a`` / ``d``           +y / -y (left / right)
``r`` / ``f``           +z / -z (up / down)
``u`` / ``o``           +rx / -rx (rotate about x)
``i`` / ``k``           +ry / -ry (rotate about y)
``j`` / ``l``           +rz / -rz (rotate about z, j = counter-clockwise from above)
arrow keys              ±x / ±y, like w/s and a/d
space                   toggle the gripper (open <-> closed)
``+`` (``=``) / ``-``   faster / slower (speed levels ``SPEEDS``)
Enter                   ``success`` event
Backspace               ``failure`` event
``x``                   ``rerecord`` event
``q`` / Esc             ``quit`` event
``t``                   ``toggle_intervention`` event
======================  ====================================

Terminals send no key-up events, so a key press drives its axis for ``hold_time`` seconds
(0.15 s by default) and the key's auto-repeat keeps it alive while held. Between the first press
and the first repeat (the OS repeat delay, often 0.25-0.6 s) the axis pauses once; raise
``hold_time`` above the repeat delay for smooth motion at the cost of longer overshoot on a tap.
Ctrl-C still raises KeyboardInterrupt (ISIG stays on); the terminal is restored on
:meth:`~hardware.devices.device.TeleopDevice.stop`, on any exception through the context manager,
and at interpreter exit.
"""

from __future__ import annotations

import atexit
import codecs
import os
import select
import sys
import termios
import time
from collections.abc import Callable
from typing import IO

import numpy as np

from hardware.devices.device import (
    AXIS_NAMES,
    EVENTS,
    GRIPPER_INDEX,
    GRIPPER_OPEN,
    MOTION_DIM,
    DeviceDisconnected,
    TeleopCommand,
    TeleopDevice,
    next_speed,
)

DEFAULT_HOLD_TIME = 0.15  # [s] a press drives its axis this long; auto-repeat (~30 Hz) refreshes it
DEFAULT_SPEED = 0.5
READ_CHUNK = 1024  # bytes per os.read; a tick drains everything pending (and sees EOF)
ESC = "\x1b"
# CSI / SS3 final bytes of the arrow keys -> key names in KEYMAP.
ARROWS = {"A": "up", "B": "down", "C": "right", "D": "left"}

# key -> command: "+x" ... "-rz" (motion), "gripper", "faster", "slower", or an event name.
KEYMAP: dict[str, str] = {
    "w": "+x", "s": "-x", "a": "+y", "d": "-y", "r": "+z", "f": "-z",
    "u": "+rx", "o": "-rx", "i": "+ry", "k": "-ry", "j": "+rz", "l": "-rz",
    "up": "+x", "down": "-x", "left": "+y", "right": "-y",
    " ": "gripper",
    "+": "faster", "=": "faster", "-": "slower",
    "\r": "success", "\n": "success",
    "\x7f": "failure", "\x08": "failure",
    "x": "rerecord",
    "q": "quit", ESC: "quit",
    "t": "toggle_intervention",
}  # fmt: skip

MOTION_COMMANDS = {
    f"{s}{a}": (i, 1.0 if s == "+" else -1.0) for i, a in enumerate(AXIS_NAMES) for s in "+-"
}
COMMANDS = frozenset(MOTION_COMMANDS) | EVENTS | {"gripper", "faster", "slower"}


def parse_keys(text: str) -> tuple[list[str], str]:
    """Split terminal input into key names: single characters, or ``up``/``down``/``left``/
    ``right`` for arrow-key escape sequences. Other escape sequences (F-keys, ...) are dropped;
    a lone Esc stays ``"\\x1b"``. Returns the keys and an incomplete trailing escape sequence
    (to prepend to the next input)."""
    keys: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == ESC and i + 1 < n and text[i + 1] in "[O":
            j = i + 2
            while j < n and "\x20" <= text[j] <= "\x3f":  # parameter and intermediate bytes
                j += 1
            if j < n:
                if text[j] in ARROWS:
                    keys.append(ARROWS[text[j]])
                i = j + 1
                continue
            return keys, text[i:]  # incomplete: its final byte is still on the way
        keys.append(ch)
        i += 1
    return keys, ""


def help_text(keymap: dict[str, str] | None = None) -> str:
    """One line per command listing its keys, for the session to print."""
    names = {
        " ": "space",
        "\r": "enter",
        "\n": "enter",
        "\x7f": "backspace",
        "\x08": "backspace",
        ESC: "esc",
    }
    by_command: dict[str, list[str]] = {}
    for key, command in (keymap or KEYMAP).items():
        label = names.get(key, key)
        if label not in by_command.setdefault(command, []):
            by_command[command].append(label)
    return "\n".join(f"{cmd:>20}: {' '.join(keys)}" for cmd, keys in by_command.items())


class KeyboardDevice(TeleopDevice):
    """Teleop from key presses on a terminal (or any readable stream).

    Args:
        stream: file descriptor or object with ``fileno()`` to read keys from; default stdin.
            A tty is switched to cbreak mode (no echo, no line buffering) while started; other
            streams (pipes, files) are read as they are. End of stream raises DeviceDisconnected.
        hold_time: how long a key press drives its axis [s].
        speed: initial action magnitude of a held key, in (0, 1].
        keymap: key -> command, replacing :data:`KEYMAP` (see there for the commands).
        clock: monotonic time source [s]; injectable for tests.
        initial_gripper: -1 open or +1 closed.
    """

    name = "keyboard"

    def __init__(
        self,
        stream: int | IO[str] | IO[bytes] | None = None,
        *,
        hold_time: float = DEFAULT_HOLD_TIME,
        speed: float = DEFAULT_SPEED,
        keymap: dict[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        initial_gripper: float = GRIPPER_OPEN,
    ) -> None:
        super().__init__(initial_gripper)
        if not hold_time > 0:
            raise ValueError(f"hold_time must be > 0 s, got {hold_time}")
        if not 0 < speed <= 1:
            raise ValueError(f"speed must be in (0, 1], got {speed}")
        keymap = dict(KEYMAP if keymap is None else keymap)
        unknown = {k: c for k, c in keymap.items() if c not in COMMANDS}
        if unknown:
            raise ValueError(f"unknown commands in keymap: {unknown}; expected {sorted(COMMANDS)}")
        self._stream = stream
        self.hold_time = float(hold_time)
        self.speed = float(speed)
        self.keymap = keymap
        self.clock = clock
        self._fd = -1
        self._saved_tty: list | None = None
        self._until = np.full(MOTION_DIM, -np.inf)  # per-axis deadline of the last press [s]
        self._direction = np.zeros(MOTION_DIM)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
        self._partial = ""  # incomplete escape sequence from the previous tick

    def _open(self) -> None:
        stream = sys.stdin if self._stream is None else self._stream
        self._fd = stream if isinstance(stream, int) else stream.fileno()
        if os.isatty(self._fd):
            self._saved_tty = termios.tcgetattr(self._fd)
            mode = termios.tcgetattr(self._fd)
            mode[3] &= ~(termios.ECHO | termios.ICANON)  # lflags; ISIG kept so Ctrl-C works
            mode[6][termios.VMIN] = 1
            mode[6][termios.VTIME] = 0
            termios.tcsetattr(self._fd, termios.TCSANOW, mode)
            # Safety net for callers that neither use `with` nor call stop().
            atexit.register(self.stop)
        self.reset()

    def _close(self) -> None:
        if self._saved_tty is not None:
            saved, self._saved_tty = self._saved_tty, None
            atexit.unregister(self.stop)
            termios.tcsetattr(self._fd, termios.TCSADRAIN, saved)
        self._fd = -1

    def reset(self) -> None:
        super().reset()
        self._until[:] = -np.inf
        self._direction[:] = 0.0
        self._decoder.reset()
        self._partial = ""

    def _pending(self) -> bytes:
        data = b""
        while select.select([self._fd], [], [], 0)[0]:
            try:
                chunk = os.read(self._fd, READ_CHUNK)
            except OSError as exc:  # e.g. EIO when the pty's other side closed
                raise DeviceDisconnected(f"keyboard stream read failed: {exc}") from exc
            if not chunk:
                raise DeviceDisconnected("keyboard stream closed (end of input)")
            data += chunk
        return data

    def _read(self) -> TeleopCommand:
        keys, self._partial = parse_keys(self._partial + self._decoder.decode(self._pending()))
        now = self.clock()
        gripper_before = self.gripper
        events: set[str] = set()
        for key in keys:
            command = self.keymap.get(key, self.keymap.get(key.lower()))
            if command is None:
                continue
            if command in MOTION_COMMANDS:
                axis, sign = MOTION_COMMANDS[command]
                self._direction[axis] = sign
                self._until[axis] = now + self.hold_time
            elif command == "gripper":
                self.toggle_gripper()
            elif command in ("faster", "slower"):
                self.speed = next_speed(self.speed, +1 if command == "faster" else -1)
            else:
                events.add(command)
        action = np.zeros(7, dtype=np.float32)
        active = now < self._until
        action[:MOTION_DIM] = np.where(active, self._direction * self.speed, 0.0)
        action[GRIPPER_INDEX] = self.gripper
        intervene = bool(active.any()) or self.gripper != gripper_before
        return TeleopCommand(action, intervene=intervene, events=frozenset(events))

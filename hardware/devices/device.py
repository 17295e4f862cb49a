"""The teleop device interface: what a human (or a scripted stand-in) commands each control tick.

A device is polled at the control rate (20 Hz by default) with a non-blocking :meth:`read`
returning a :class:`TeleopCommand`:

- ``action``: (7,) float32 in [-1, 1] in the env's convention (``sim/env.py``): TCP translation
  delta xyz, rotation-vector delta, both in the robot base frame, then the gripper (-1 open,
  +1 closed). With no input the motion part is zero and the gripper keeps its last state.
- ``intervene``: the human is actively driving (motion input, a held deadman button, or a
  gripper toggle this tick). Human-in-the-loop RL executes ``action`` instead of the policy's.
- ``events``: one-shot events (a subset of :data:`EVENTS`) raised this tick.

A device whose connection is lost raises :class:`DeviceDisconnected` from :meth:`read`, and keeps
raising it: it never returns stale motion. :meth:`stop` is idempotent, and the context manager
stops the device on any exit, exceptions and ``KeyboardInterrupt`` included.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from types import TracebackType

import numpy as np

ACTION_DIM = 7
MOTION_DIM = 6  # translation xyz + rotation vector
GRIPPER_INDEX = 6
GRIPPER_OPEN = -1.0
GRIPPER_CLOSED = 1.0
EVENTS: frozenset[str] = frozenset(
    {"success", "failure", "rerecord", "quit", "toggle_intervention"}
)
AXIS_NAMES: tuple[str, ...] = ("x", "y", "z", "rx", "ry", "rz")  # action indices 0..5
SPEEDS: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 1.0)  # speed levels of faster/slower inputs


class DeviceDisconnected(RuntimeError):
    """The device's connection was lost (unplugged, stream closed); its input can't be trusted."""


class DeviceNotFound(RuntimeError):
    """No matching device is connected (or it can't be opened, e.g. for lack of permissions)."""


@dataclass
class TeleopCommand:
    """One tick of operator input.

    Args:
        action: (7,) in [-1, 1]: translation delta xyz, rotation-vector delta (base frame),
            gripper (-1 open, +1 closed). Stored as a float32 copy.
        intervene: the human is actively driving this tick.
        events: one-shot events, a subset of :data:`EVENTS`.
    """

    action: np.ndarray
    intervene: bool = False
    events: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        action = np.array(self.action, dtype=np.float32)
        if action.shape != (ACTION_DIM,):
            raise ValueError(f"action must have shape ({ACTION_DIM},), got {action.shape}")
        if not np.all(np.isfinite(action)) or np.any(np.abs(action) > 1.0):
            raise ValueError(f"action must be finite and in [-1, 1], got {action}")
        events = frozenset(self.events)
        if not events <= EVENTS:
            raise ValueError(
                f"unknown events {sorted(events - EVENTS)}; expected a subset of {sorted(EVENTS)}"
            )
        self.action = action
        self.intervene = bool(self.intervene)
        self.events = events

    @classmethod
    def idle(cls, gripper: float, events: frozenset[str] = frozenset()) -> TeleopCommand:
        """No motion, the gripper held at ``gripper`` (-1 open, +1 closed)."""
        action = np.zeros(ACTION_DIM, dtype=np.float32)
        action[GRIPPER_INDEX] = gripper
        return cls(action, intervene=False, events=events)


def check_gripper(value: float) -> float:
    """``value`` if it is a valid gripper state (-1 open or +1 closed), else ValueError."""
    if value not in (GRIPPER_OPEN, GRIPPER_CLOSED):
        raise ValueError(f"gripper state must be -1 (open) or +1 (closed), got {value}")
    return float(value)


def next_speed(speed: float, step: int) -> float:
    """The level of :data:`SPEEDS` next above (step > 0) or below (step < 0) ``speed``."""
    if step > 0:
        return next((s for s in SPEEDS if s > speed + 1e-9), SPEEDS[-1])
    return next((s for s in reversed(SPEEDS) if s < speed - 1e-9), SPEEDS[0])


class TeleopDevice(ABC):
    """Base class of teleop devices.

    Subclasses implement :meth:`_open`, :meth:`_close` and :meth:`_read`; the base class keeps
    the lifecycle (start/stop/context manager), the sticky disconnect and the gripper state.

    Args:
        initial_gripper: gripper state at start and after :meth:`reset` (-1 open, +1 closed).
    """

    name: str = "teleop"

    def __init__(self, initial_gripper: float = GRIPPER_OPEN) -> None:
        self.initial_gripper = check_gripper(initial_gripper)
        self.gripper = self.initial_gripper
        self._started = False
        self._disconnected: str | None = None

    @property
    def started(self) -> bool:
        return self._started

    def start(self) -> None:
        """Open the device; a no-op when already started."""
        if self._started:
            return
        self._disconnected = None
        self._open()
        self._started = True

    def stop(self) -> None:
        """Release the device (restore the terminal, close handles). Idempotent."""
        if not self._started:
            return
        self._started = False
        self._close()

    def read(self) -> TeleopCommand:
        """Input of this control tick, non-blocking; DeviceDisconnected once the link is lost."""
        if not self._started:
            raise RuntimeError(f"{self.name} device is not started; call start() or use `with`")
        if self._disconnected is not None:
            raise DeviceDisconnected(self._disconnected)
        try:
            return self._read()
        except DeviceDisconnected as exc:
            self._disconnected = str(exc)
            raise

    def reset(self) -> None:
        """Forget held input and return the gripper to its initial state (between episodes)."""
        self.gripper = self.initial_gripper

    def toggle_gripper(self) -> None:
        self.gripper = -self.gripper

    def __enter__(self) -> TeleopDevice:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _open(self) -> None:  # noqa: B027 - optional hook
        """Acquire the device; called by :meth:`start`."""

    def _close(self) -> None:  # noqa: B027 - optional hook
        """Release the device; called once by :meth:`stop` after a successful start."""

    @abstractmethod
    def _read(self) -> TeleopCommand:
        """One non-blocking poll; raise DeviceDisconnected when the link is lost."""

"""Scripted operators: replay a list of commands, or let a scripted expert drive.

:class:`ScriptedDevice` replays :class:`~hardware.devices.device.TeleopCommand` s (tests, and
canned operator sessions). :class:`ExpertDevice` turns any ``expert(obs) -> action (7,)`` (e.g.
``sim.make_expert(task, env)``) into an operator that always intervenes; the session feeds it
each observation with :meth:`ExpertDevice.observe` before :meth:`read`. Success and failure are
the session's call (from the env), so the expert raises no events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from hardware.devices.device import (
    ACTION_DIM,
    GRIPPER_INDEX,
    GRIPPER_OPEN,
    TeleopCommand,
    TeleopDevice,
)


class ScriptedDevice(TeleopDevice):
    """Replays commands, one per :meth:`read`.

    Args:
        commands: TeleopCommands, or (7,) actions (replayed with ``intervene=True``). Consumed
            lazily and once: :meth:`reset` does not rewind.
        quit_when_done: after the last command, raise a ``quit`` event once.
        initial_gripper: gripper state reported before the first command's.

    After the script ends, reads return no motion and the last command's gripper state.
    """

    name = "scripted"

    def __init__(
        self,
        commands: Iterable[TeleopCommand | np.ndarray],
        *,
        quit_when_done: bool = False,
        initial_gripper: float = GRIPPER_OPEN,
    ) -> None:
        super().__init__(initial_gripper)
        self._commands: Iterator[TeleopCommand | np.ndarray] = iter(commands)
        self.quit_when_done = quit_when_done
        self.done = False
        self._quit_sent = False

    def _read(self) -> TeleopCommand:
        if not self.done:
            item = next(self._commands, None)
            if item is not None:
                cmd = item if isinstance(item, TeleopCommand) else TeleopCommand(item, True)
                self.gripper = float(cmd.action[GRIPPER_INDEX])
                return cmd
            self.done = True
        events: frozenset[str] = frozenset()
        if self.quit_when_done and not self._quit_sent:
            self._quit_sent = True
            events = frozenset({"quit"})
        return TeleopCommand.idle(self.gripper, events)


class ExpertDevice(TeleopDevice):
    """A scripted expert as the operator: always intervening, acting on the latest observation.

    Args:
        expert: ``expert(obs) -> action`` (7,) in the env's convention; values are clipped to
            [-1, 1]. Its ``reset()`` (if any) is called by :meth:`reset`.
    """

    name = "expert"

    def __init__(self, expert: Callable[[Any], np.ndarray]) -> None:
        super().__init__(GRIPPER_OPEN)
        if not callable(expert):
            raise TypeError(f"expert must be callable obs -> action, got {type(expert).__name__}")
        self.expert = expert
        self._obs: Any = None

    def observe(self, obs: Any) -> None:
        """Give the observation the next :meth:`read` acts on."""
        self._obs = obs

    def reset(self) -> None:
        super().reset()
        self._obs = None
        reset = getattr(self.expert, "reset", None)
        if callable(reset):
            reset()

    def _read(self) -> TeleopCommand:
        if self._obs is None:
            raise RuntimeError("ExpertDevice.read() before observe(obs): nothing to act on")
        action = np.asarray(self.expert(self._obs), dtype=np.float64)
        if action.shape != (ACTION_DIM,) or not np.all(np.isfinite(action)):
            raise ValueError(
                f"expert must return a finite ({ACTION_DIM},) action, got shape {action.shape}: "
                f"{action}"
            )
        action = np.clip(action, -1.0, 1.0)
        self.gripper = 1.0 if action[GRIPPER_INDEX] > 0 else -1.0
        return TeleopCommand(action, intervene=True)

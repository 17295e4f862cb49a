"""Grasp hold: a held object stays in the hand until it is low enough to be put down.

A noisy gripper command (e.g. +0.2 instead of +1 on the [-1 open, +1 closed] scale) opens a
parallel gripper by a few millimetres, and a held peg slides out and strikes the table or the
hole block. No arm motion can undo that once it starts, so the reflex stops it at the source:
while the fingers hold something and the TCP is above ``release_z``, a command that would
loosen the grasp is raised to ``close``. Below ``release_z`` every gripper command passes.

Holding means the fingers stopped on an object, ``min_width < opening < max_width`` [m], under a
closing command (the last executed gripper command > 0). An empty gripper that closes passes
``min_width`` at the start of its travel only and is then below it; an opening command from a
closed, empty gripper finds no object and passes. Allocation-free: one call per control
step, as an action stage of :class:`controllers.commander.Commander`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

import numpy as np


class GraspHold:
    """Keeps a grasp closed above ``release_z``.

    Args:
        release_z: TCP height [m] (base frame) below which the gripper may open.
        min_width, max_width: finger opening [m] that counts as holding an object (the Panda
            hand: 0 closed and empty, 0.08 open; a 24 mm peg reads 0.024).
        close: the gripper command the grasp is held at (1: fully closed).
    """

    # what apply() reports: whether it raised the gripper command
    FLAGS: ClassVar[tuple[str, ...]] = ("grasp_hold",)

    def __init__(
        self,
        release_z: float,
        min_width: float = 0.005,
        max_width: float = 0.07,
        close: float = 1.0,
    ) -> None:
        if not all(math.isfinite(v) for v in (release_z, min_width, max_width, close)):
            raise ValueError("grasp hold parameters must be finite")
        if not 0.0 <= min_width < max_width:
            raise ValueError(f"need 0 <= min_width < max_width, got {min_width}, {max_width}")
        if not 0.0 < close <= 1.0:
            raise ValueError(f"close must be a closing command in (0, 1], got {close}")
        self.release_z, self.min_width, self.max_width = release_z, min_width, max_width
        self.close = close
        self.last_command = 0.0
        self.holds = 0  # commands raised since construction

    def reset(self, command: float = 0.0) -> None:
        """Episode start; ``command`` is the gripper command the episode starts with."""
        self.last_command = command

    def holding(self, opening: float) -> bool:
        """Whether the fingers [m] hold an object under the last (closing) command."""
        return self.last_command > 0.0 and self.min_width < opening < self.max_width

    def apply(self, action: np.ndarray, ee_pos: np.ndarray, opening: float) -> Mapping[str, bool]:
        """As an action stage (:class:`controllers.commander.ActionStage`): raise the gripper
        entry ``action[6]`` in place while a held object is above ``release_z``."""
        command = self(float(action[6]), opening, float(ee_pos[2]))
        held = bool(command != action[6])
        action[6] = command
        return {"grasp_hold": held}

    def __call__(self, command: float, opening: float, tcp_z: float) -> float:
        """The gripper command to execute for ``command`` in [-1, 1], given the finger
        ``opening`` [m] and the TCP height ``tcp_z`` [m]. A non-finite command closes."""
        if not math.isfinite(command):
            command = self.close if self.holding(opening) else 0.0
        if command < self.close and tcp_z > self.release_z and self.holding(opening):
            command = self.close
            self.holds += 1
        self.last_command = command
        return command

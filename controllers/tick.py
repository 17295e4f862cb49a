"""The per-tick torque loop and the interface of what it drives (numpy only, no torch).

One physics/control tick (500 Hz in sim, the robot's rate on a torque-controlled arm) is::

    state = backend.sense()                               # measure q, dq, TCP pose, Jacobian
    tau = controller.compute(state)                       # impedance / OSC law
    tau = torque_filter.filter_torque(tau, state.q, state.dq)   # joint, velocity, torque limits
    backend.apply_torque(tau)
    backend.integrate()                                   # the physics (or the robot) moves

:class:`TorqueLoop` is that sequence, written once; the MuJoCo and PyBullet envs run it. Arms
whose own controller closes this loop (the ROS 2 robot's impedance controller, ManiSkill's
``pd_ee_delta_pose``, MuJoCo's native impedance actuator) take a target instead
(:class:`TargetBackend`); the target every backend tracks comes from
:class:`controllers.commander.Commander`.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Protocol

import numpy as np

from controllers.arm_state import ArmState
from controllers.safety_filter import SafetyFilter


class TorqueBackend(Protocol):
    """An arm driven by joint torques, one tick at a time."""

    def sense(self) -> ArmState:
        """Measure the arm at the start of a tick (filled in place)."""
        ...

    def apply_torque(self, tau: np.ndarray) -> None:
        """Command joint torques ``tau`` (n,) [Nm] for this tick."""
        ...

    def integrate(self) -> None:
        """Advance the arm by one tick under the applied torques."""
        ...


class TargetBackend(Protocol):
    """An arm whose own controller tracks a TCP target."""

    def track(self, pos: np.ndarray, rot: np.ndarray) -> None:
        """Track the TCP target ``pos`` (3,) [m], ``rot`` (3, 3), base frame (already safe)."""
        ...

    def set_gripper(self, command: float) -> None:
        """Gripper command in [-1 open, +1 closed]."""
        ...


class TorqueController(Protocol):
    """A control law (:class:`controllers.impedance.CartesianImpedance`, OSC, ...)."""

    def compute(self, state: ArmState) -> np.ndarray:
        """Joint torques (n,) [Nm] for ``state``."""
        ...


class TorqueLoop:
    """sense -> controller -> torque filter -> apply -> integrate, once per :meth:`tick`.

    Args:
        backend: the arm.
        controller: the control law (its target is set elsewhere, at policy rate).
        torque_filter: the safety filter whose torque stage every command passes last.
    """

    def __init__(
        self, backend: TorqueBackend, controller: TorqueController, torque_filter: SafetyFilter
    ) -> None:
        self.backend, self.controller, self.filter = backend, controller, torque_filter

    def tick(self, flags: MutableMapping[str, object] | None = None) -> np.ndarray:
        """One tick; returns the applied torques (the filter's buffer, valid until the next
        tick). What the torque filter changed is OR-ed into ``flags``."""
        s = self.backend.sense()
        tau = self.filter.filter_torque(self.controller.compute(s), s.q, s.dq)
        self.backend.apply_torque(tau)
        self.backend.integrate()
        if flags is not None:
            for key, value in self.filter.last_flags.items():
                flags[key] = bool(flags.get(key, False)) or value
        return tau

    def run(self, ticks: int, flags: MutableMapping[str, object] | None = None) -> None:
        """``ticks`` ticks."""
        for _ in range(ticks):
            self.tick(flags)

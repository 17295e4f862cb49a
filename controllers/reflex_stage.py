"""The safety reflex as a stage of the control loop, the same on every backend (numpy only).

Between two policy steps the loop ticks (500 Hz physics in sim, the state rate on a robot).
:class:`ReflexStage` runs :class:`controllers.reflex.Reflex` on some of those ticks::

    stage.begin(command)                  # a policy step: the executed action (after the
                                          #   commander's action stages), None when non-finite
    replacement = stage.tick(features)    # each reflex tick: None, or the action (7,) that
                                          #   replaces the target from now on (the caller turns
                                          #   it into a target with Commander.retarget)
    flags = stage.flags()                 # what the reflex did during the step

Within a step a substituted target is replaced only by a stronger intervention (slowed ->
recovery); a recovery target is re-checked as the command. While the reflex intervenes in
contact it lowers the stiffness through a :class:`Compliance` (the sim controller, or the
robot's impedance parameters); the nominal stiffness returns at the first tick of a step whose
command passes and that starts out of contact (snapping it back while pressed against something
would turn the held spring error into a force jump).

Features (O = 10 + task entries) are measurable on any arm (:data:`FEATURES`, base frame): TCP
position [m], TCP linear velocity [m/s], external force on the hand [N], finger opening [m], then
a critic's task entries. :func:`robot_features` writes the first ten.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from controllers.reflex import CONTACT_FORCE, PASS, RECOVER, Reflex

FEATURES = (("ee_pos", 3), ("ee_vel", 3), ("force", 3), ("gripper", 1))
ROBOT_FEATURES = sum(n for _, n in FEATURES)  # 10
FORCE = slice(6, 9)  # where the external force sits in the features
VELOCITY = slice(3, 6)  # where the TCP linear velocity sits


def robot_features(
    out: np.ndarray,
    ee_pos: np.ndarray,
    ee_vel: np.ndarray,
    force: np.ndarray,
    opening: float,
) -> np.ndarray:
    """Write the :data:`FEATURES` into ``out[:10]`` (``out`` (O,), its task entries untouched):
    TCP position (3,) [m], linear velocity (3,) [m/s], external force (3,) [N], all base frame,
    and the finger opening [m]. Returns ``out``."""
    out[0:3] = ee_pos
    out[3:6] = ee_vel
    out[6:9] = force
    out[9] = opening
    return out


class Compliance(Protocol):
    """What can lower and restore the arm's stiffness (a controller, a robot's impedance)."""

    @property
    def stiffness(self) -> np.ndarray:
        """The current Cartesian stiffness (6,) [N/m x3, Nm/rad x3]."""
        ...

    def set_stiffness(self, stiffness: np.ndarray) -> object:
        """Command the Cartesian stiffness (6,) (what it returns is not used)."""
        ...


class ReflexStage:
    """The reflex between policy steps (module docstring).

    Args:
        reflex: the decision rule with its risk critic.
        compliance: what lowers the stiffness while the reflex intervenes in contact (None:
            the stiffness is never lowered; the recovery and slowing targets still act).
    """

    def __init__(self, reflex: Reflex, compliance: Compliance | None = None) -> None:
        self.reflex, self.compliance = reflex, compliance
        n = reflex.critic.act_dim
        self._cmd = np.zeros(n)  # the step's executed command
        self._held = np.zeros(n)  # the action that replaced it this step
        self.level = PASS  # the strongest replacement of this step
        self.ticks = 0  # reflex ticks of this step that slowed or recovered
        self.risk = 0.0  # highest risk of this step
        self._first = True
        self._nominal: np.ndarray | None = None  # stiffness before the reflex lowered it

    def reset(self) -> None:
        """Episode start: nothing replaced, the reflex's last decision forgotten."""
        self.reflex.level = PASS
        self.level = PASS

    def begin(self, command: np.ndarray | None) -> None:
        """A policy step with the executed ``command`` (7,) (None: non-finite, held by the
        safety filter; the reflex then evaluates a zero motion)."""
        if command is None:
            self._cmd[:] = 0.0
        else:
            np.copyto(self._cmd, command)
        self.level, self.ticks, self.risk, self._first = PASS, 0, 0.0, True

    def tick(self, features: np.ndarray) -> np.ndarray | None:
        """Evaluate once at ``features`` (O,); returns the action (7,) that replaces the target
        (a buffer of the stage, valid until the next replacement), or None."""
        reflex = self.reflex
        cmd = self._held if self.level == RECOVER else self._cmd
        reflex.tick(features, cmd, features[FORCE], features[VELOCITY])
        out = None
        if reflex.level != PASS:
            self.ticks += 1
            if reflex.level > self.level:
                np.copyto(self._held, reflex.action)
                self.level = reflex.level
                out = self._held
            if reflex.soften:
                self._lower()
        elif self._first and float(np.linalg.norm(features[FORCE])) < CONTACT_FORCE:
            self.release()
        self._first = False
        self.risk = max(self.risk, reflex.risk)
        return out

    @property
    def stiffness_lowered(self) -> bool:
        return self._nominal is not None

    def flags(self) -> dict[str, bool | int | float]:
        """What the reflex did in this step: ``reflex`` (it slowed or recovered on some tick),
        ``reflex_ticks``, ``risk`` (the highest), ``stiffness_lowered`` (now)."""
        return {
            "reflex": self.ticks > 0,
            "reflex_ticks": self.ticks,
            "risk": self.risk,
            "stiffness_lowered": self.stiffness_lowered,
        }

    def release(self) -> None:
        """Give the arm back the stiffness the reflex lowered (if it did)."""
        if self._nominal is not None and self.compliance is not None:
            self.compliance.set_stiffness(self._nominal)
        self._nominal = None

    def _lower(self) -> None:
        if self._nominal is None and self.compliance is not None:
            self._nominal = np.array(self.compliance.stiffness, dtype=float)
            self.compliance.set_stiffness(self._nominal * self.reflex.stiffness_scale)

"""TorqueLoop: sense -> control -> torque filter -> apply -> integrate, in that order, with the
filter always last; MuJoCo and PyBullet envs run it."""

from __future__ import annotations

import numpy as np
import pytest

from controllers.arm_state import ArmState
from controllers.commander import DEFAULT_WORKSPACE_HIGH, DEFAULT_WORKSPACE_LOW
from controllers.safety_filter import SafetyFilter
from controllers.tick import TorqueBackend, TorqueLoop


class RecordingArm:
    """A 7-joint arm that records the calls it gets."""

    def __init__(self) -> None:
        self.state = ArmState(7)
        self.calls: list[str] = []
        self.applied: list[np.ndarray] = []

    def sense(self) -> ArmState:
        self.calls.append("sense")
        return self.state

    def apply_torque(self, tau: np.ndarray) -> None:
        self.calls.append("apply")
        self.applied.append(tau.copy())

    def integrate(self) -> None:
        self.calls.append("integrate")


class Constant:
    def __init__(self, tau: np.ndarray) -> None:
        self.tau = tau

    def compute(self, state: ArmState) -> np.ndarray:
        return self.tau


def _filter() -> SafetyFilter:
    return SafetyFilter(np.array(DEFAULT_WORKSPACE_LOW), np.array(DEFAULT_WORKSPACE_HIGH))


def test_order_and_the_filter_is_last() -> None:
    arm: TorqueBackend = RecordingArm()
    loop = TorqueLoop(arm, Constant(np.full(7, 1e4)), _filter())
    flags: dict[str, object] = {}
    loop.run(2, flags)
    assert arm.calls == ["sense", "apply", "integrate"] * 2
    assert all(np.all(np.abs(t) <= loop.filter.tau_max) for t in arm.applied)
    assert flags["torque_clipped"] is True and flags["nan"] is False


def test_nan_torque_becomes_a_finite_hold() -> None:
    arm = RecordingArm()
    arm.state.dq[:] = 0.5
    loop = TorqueLoop(arm, Constant(np.full(7, np.nan)), _filter())
    flags: dict[str, object] = {"nan": False}
    tau = loop.tick(flags)
    assert np.isfinite(tau).all() and np.all(tau < 0)  # damping against the motion
    assert flags["nan"] is True


@pytest.mark.parametrize("backend", ["mujoco", "pybullet"])
def test_sim_envs_run_the_loop(backend) -> None:
    if backend == "pybullet":
        pytest.importorskip("pybullet")
    import sim

    env = sim.make("reach", backend=backend, controller="impedance")
    env.reset(seed=0)
    ticks = []
    tick = env._loop.tick
    env._loop.tick = lambda flags=None: ticks.append(1) or tick(flags)
    env.step(np.zeros(7))
    assert len(ticks) == env.n_substeps
    env.close()

"""ReflexStage: the reflex between policy steps, backend-neutral (numpy only): what it replaces,
when it lowers and restores the stiffness, and the feature layout every backend fills."""

import numpy as np
from reflex_weights import OBS, pushing_down_low_critic

from controllers.reflex import PASS, RECOVER, Reflex, RiskMLP
from controllers.reflex_stage import FEATURES, ReflexStage, robot_features

DOWN = np.array([0.2, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0])
UP = np.array([0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0])
NOMINAL = np.array([600.0, 600.0, 600.0, 30.0, 30.0, 30.0])


class Spring:
    """A Compliance that records what it was told."""

    def __init__(self) -> None:
        self.stiffness = NOMINAL.copy()
        self.calls = 0

    def set_stiffness(self, k: np.ndarray) -> None:
        self.stiffness = np.array(k)
        self.calls += 1


def _feat(z: float, force: float = 0.0) -> np.ndarray:
    f = np.zeros(OBS)
    return robot_features(f, np.array([0.5, 0.0, z]), np.zeros(3), np.array([0, 0, force]), 0.04)


def _stage() -> tuple[ReflexStage, Spring]:
    spring = Spring()
    return ReflexStage(Reflex(RiskMLP(pushing_down_low_critic())), spring), spring


def test_feature_layout_is_the_critics() -> None:
    assert [n for n, _ in FEATURES] == ["ee_pos", "ee_vel", "force", "gripper"]
    f = robot_features(np.full(12, 7.0), [1, 2, 3], [4, 5, 6], [7, 8, 9], 0.5)
    np.testing.assert_array_equal(f, [1, 2, 3, 4, 5, 6, 7, 8, 9, 0.5, 7.0, 7.0])


def test_a_risky_command_is_replaced_once_per_level_and_counted() -> None:
    stage, _ = _stage()
    stage.begin(DOWN)
    assert stage.tick(_feat(0.40)) is None  # high above the limit: passes
    out = stage.tick(_feat(0.10))  # low and pushing down: the brake replaces it
    assert out is not None and stage.level == RECOVER
    np.testing.assert_array_equal(out, [0, 0, 0, 0, 0, 0, 1.0])  # at rest: hold, gripper kept
    # the recovery target is re-checked as the command: safe, nothing new to replace
    assert stage.tick(_feat(0.10)) is None
    flags = stage.flags()
    assert flags["reflex"] and flags["reflex_ticks"] == 1 and flags["risk"] > 0.99
    stage.begin(UP)  # the next step starts clean
    assert stage.tick(_feat(0.10)) is None and stage.flags()["reflex"] is False
    assert stage.level == PASS


def test_a_non_finite_command_is_checked_as_no_motion() -> None:
    stage, _ = _stage()
    stage.begin(None)
    assert stage.tick(_feat(0.05)) is None and not stage.flags()["reflex"]


def test_stiffness_drops_in_contact_and_returns_out_of_contact_at_a_step_start() -> None:
    stage, spring = _stage()
    stage.begin(DOWN)
    stage.tick(_feat(0.40))
    assert spring.calls == 0  # free space: no softening
    stage.tick(_feat(0.10, force=8.0))  # vetoed while pressing: lowered to 25 %
    np.testing.assert_allclose(spring.stiffness, 0.25 * NOMINAL)
    assert stage.flags()["stiffness_lowered"]
    stage.tick(_feat(0.10, force=8.0))
    assert spring.calls == 1  # lowered once, not compounded
    stage.begin(UP)
    stage.tick(_feat(0.10, force=8.0))  # still pressed at the step start: stays soft
    assert stage.stiffness_lowered
    stage.tick(_feat(0.12, force=0.0))  # out of contact, but not at a step start
    assert stage.stiffness_lowered
    stage.begin(UP)
    stage.tick(_feat(0.12, force=0.0))
    np.testing.assert_allclose(spring.stiffness, NOMINAL)
    assert not stage.flags()["stiffness_lowered"]


def test_without_compliance_the_targets_still_act() -> None:
    stage = ReflexStage(Reflex(RiskMLP(pushing_down_low_critic())))
    stage.begin(DOWN)
    assert stage.tick(_feat(0.10, force=8.0)) is not None
    assert not stage.flags()["stiffness_lowered"]
    stage.release()  # nothing to give back

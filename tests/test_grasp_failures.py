"""The lift failure modes: the classification of an episode's record, the scripted expert's
episodes are successes, an expert pushed sideways never closes its gripper, and a
constant offset that undoes a planted one fixes the episodes it broke, and the expert's rotation
rescues a policy that tilts the gripper away unless the fix is bounded below the tilt; the
closing pose reads the gripper's turn off the cube's face and its tilt, and is summarised per
outcome."""

import numpy as np
import pytest

import sim
from controllers.rotations import mat_to_quat
from robotrl.benchmarks.expert_rotation import RotationFix
from robotrl.benchmarks.grasp_failures import (
    GraspRecord,
    classify,
    closing_poses,
    constant_offsets,
    grasp_failures,
    gripper_turn,
)
from sim.expert import yaw_down
from sim.task import yaw_quat


@pytest.mark.parametrize(
    ("record", "mode"),
    [
        (GraspRecord(True, (0.0, 0.0, 0.0), 0.0, 0.12), "success"),
        (GraspRecord(False, (0.0, 0.0, 0.0), 0.0, 0.05), "lifted_low"),
        (GraspRecord(False, None, 0.2, 0.0), "never_closed"),
        (GraspRecord(False, (0.05, 0.06, 0.0), 0.07, 0.0), "closed_off"),
        (GraspRecord(False, (0.0, 0.01, 0.03), 0.03, 0.0), "closed_high"),
        (GraspRecord(False, (0.005, 0.0, 0.01), 0.01, 0.0), "closed_near"),
    ],
)
def test_a_record_gets_its_mode(record, mode) -> None:
    assert classify(record) == mode


class _Shifted:
    """The scripted lift expert with a constant action ``shift`` (an episode policy)."""

    def __init__(self, env, shift) -> None:
        self.expert, self.shift = sim.make_expert("lift", env), np.asarray(shift)

    def reset(self) -> None:
        self.expert.reset()

    def __call__(self, obs):
        return np.clip(self.expert(obs) + self.shift, -1.0, 1.0)


@pytest.fixture(scope="module")
def env():
    e = sim.make("lift")
    yield e
    e.close()


def test_the_experts_episodes_are_successes(env) -> None:
    out = grasp_failures(env, _Shifted(env, np.zeros(7)), episodes=2, seed=0)
    assert out["modes"] == {"success": 2} and out["success_rate"] == 1.0


def test_a_sideways_drift_keeps_the_gripper_open_and_the_opposite_offset_fixes_it(env) -> None:
    drift = np.zeros(7)
    drift[1] = 0.4  # the expert closes once within 6 mm of the cube, which the drift prevents
    out = grasp_failures(env, _Shifted(env, drift), episodes=2, seed=0, offsets=-drift[None])
    assert out["modes"] == {"never_closed": 2} and out["success_rate"] == 0.0
    assert out["fixed_by_an_offset"] == {"never_closed": 2} and out["offsets"] == 1


def test_the_offsets_are_horizontal_directions_and_down() -> None:
    o = constant_offsets(7, sizes=(0.03,))
    assert o.shape == (9, 7)
    np.testing.assert_allclose(np.linalg.norm(o[:8, :2], axis=1), 0.03)
    assert (o[:8, 2:] == 0).all() and o[8, 2] == -0.03 and (o[:, 3:] == 0).all()


class _Coin(_Shifted):
    """Fails (gripper never closes) or acts as the expert, by a coin flip per episode."""

    def __init__(self, env) -> None:
        super().__init__(env, np.zeros(7))
        self.rng, self.expert_now = np.random.default_rng(0), False

    def reset(self) -> None:
        super().reset()
        self.expert_now = bool(self.rng.integers(2))

    def __call__(self, obs):
        a = super().__call__(obs)
        return a if self.expert_now else np.r_[a[:6], -1.0]


def test_offsets_refuse_a_policy_that_does_not_repeat_its_episodes(env) -> None:
    with pytest.raises(ValueError, match="succeeded when replayed"):
        grasp_failures(env, _Coin(env), episodes=6, seed=0, offsets=np.zeros((1, 7)))


def test_no_episodes_is_refused(env) -> None:
    with pytest.raises(ValueError, match="episodes must be >= 1"):
        grasp_failures(env, _Shifted(env, np.zeros(7)), episodes=0, seed=0)


class _Tilting(_Shifted):
    """The expert whose first rotation entry is held at ``rate``: the gripper tilts away."""

    def __init__(self, env, rate) -> None:
        super().__init__(env, np.zeros(7))
        self.rate = rate

    def __call__(self, obs):
        action = self.expert(obs).copy()
        action[3] = self.rate
        return action


def test_the_experts_rotation_rescues_a_tilting_policy_unless_bounded_below_the_tilt(env) -> None:
    tilting = _Tilting(env, 0.3)
    assert grasp_failures(env, tilting, episodes=2, seed=0)["success_rate"] == 0.0
    fixed = grasp_failures(env, tilting, episodes=2, seed=0, rotation=RotationFix())
    assert fixed["success_rate"] == 1.0
    short = grasp_failures(env, tilting, episodes=2, seed=0, rotation=RotationFix(0.05))
    assert short["success_rate"] == 0.0


@pytest.mark.parametrize(
    ("ee_yaw", "cube_yaw", "off"), [(0.3, 0.1, 0.2), (0.1, 1.6, 0.1 - 1.6 + np.pi / 2)]
)
def test_the_turn_is_the_yaw_off_the_nearest_face_and_the_tilt_off_down(
    ee_yaw, cube_yaw, off
) -> None:
    yaw, tilt = gripper_turn(mat_to_quat(yaw_down(ee_yaw)), yaw_quat(cube_yaw))
    assert yaw == pytest.approx(off) and tilt == pytest.approx(0.0, abs=1e-6)
    c, s = np.cos(0.2), np.sin(0.2)
    tilted = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]) @ yaw_down(0.0)
    assert gripper_turn(mat_to_quat(tilted), yaw_quat(0.0))[1] == pytest.approx(0.2)


def test_closing_poses_are_summarised_per_outcome() -> None:
    records = [
        GraspRecord(True, (0.003, 0.004, 0.01), 0.0, 0.12, (np.radians(-2.0), np.radians(1.0))),
        GraspRecord(True, (0.0, 0.0, -0.002), 0.0, 0.12, (np.radians(4.0), np.radians(3.0))),
        GraspRecord(False, None, 0.2, 0.0),  # never closed: no pose
    ]
    out = closing_poses(records)
    assert out["failure"] == {"episodes": 0, "yaw_deg": None, "tilt_deg": None, "xy_mm": None,
                              "height_mm": None}  # fmt: skip
    ok = out["success"]
    assert ok["episodes"] == 2 and ok["yaw_deg"] == [3.0, 3.8] and ok["tilt_deg"] == [2.0, 2.8]
    assert ok["xy_mm"] == [2.5, 4.5] and ok["height_mm"] == [4.0, 8.8]


def test_the_experts_grasps_close_square_to_the_cube(env) -> None:
    out = grasp_failures(env, _Shifted(env, np.zeros(7)), episodes=2, seed=0)["closing"]
    assert out["success"]["episodes"] == 2 and out["failure"]["episodes"] == 0
    assert out["success"]["yaw_deg"][1] < 3.0 and out["success"]["tilt_deg"][1] < 3.0
    assert out["success"]["xy_mm"][1] < 10.0

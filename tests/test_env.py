"""The Panda env: API, reproducibility, action semantics, safety, sensing, rendering."""

import numpy as np
import pytest

import sim
from controllers.commander import DEFAULT_WORKSPACE_HIGH
from sim.env import PandaEnv
from sim.tasks.lift import LiftTask

CONTROLLERS = ["impedance", "native"]


@pytest.fixture(scope="module", params=CONTROLLERS)
def env(request):
    e = sim.make("lift", controller=request.param)
    yield e
    e.close()


def _rollout(env, seed, actions):
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for a in actions:
        out.append(env.step(a)[0])
    return out


def test_observation_matches_space(env):
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert obs["state/ee_quat"].shape == (4,)
    assert info == {"success": False, "intervention": False}
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert env.observation_space.contains(obs)
    assert isinstance(reward, float) and not terminated and not truncated
    assert set(info) >= {"success", "intervention", "safety"}


def test_same_seed_same_episode_and_different_seed_differs(env):
    actions = np.random.default_rng(0).uniform(-1, 1, (10, 7)).astype(np.float32)
    a, b = _rollout(env, 3, actions), _rollout(env, 3, actions)
    for oa, ob in zip(a, b, strict=True):
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k])
    c = _rollout(env, 4, actions)
    assert not np.allclose(a[0]["state/cube_pos"], c[0]["state/cube_pos"])


def test_zero_action_holds_and_unit_action_moves_along_axis(env):
    obs, _ = env.reset(seed=0)
    start = obs["state/ee_pos"].copy()
    for _ in range(10):
        obs = env.step(np.zeros(7, np.float32))[0]
    assert np.linalg.norm(obs["state/ee_pos"] - start) < 2e-3
    a = np.zeros(7, np.float32)
    a[0] = 1.0
    for _ in range(5):
        obs = env.step(a)[0]
    moved = obs["state/ee_pos"] - start
    assert moved[0] > 0.04  # ~5 x 2 cm commanded; the arm follows most of it
    assert abs(moved[1]) < 0.01 and abs(moved[2]) < 0.01


def test_nan_and_inf_actions_hold_the_arm(env):
    obs, _ = env.reset(seed=0)
    start = obs["state/ee_pos"].copy()
    for bad in (np.nan, np.inf, -np.inf):
        a = np.zeros(7, np.float32)
        a[1] = bad
        obs, _, _, _, info = env.step(a)
        assert info["safety"]["nan"]
        assert all(np.isfinite(v).all() for v in obs.values())
    assert np.linalg.norm(obs["state/ee_pos"] - start) < 3e-3


def test_wrong_action_shape_is_a_clear_error(env):
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(7,\)"):
        env.step(np.zeros(6))


def test_workspace_box_holds_under_a_persistent_push(env):
    env.reset(seed=0)
    a = np.zeros(7, np.float32)
    a[2] = 1.0
    for _ in range(30):
        obs, _, _, _, info = env.step(a)
    assert obs["state/ee_pos"][2] <= DEFAULT_WORKSPACE_HIGH[2] + 0.01
    assert info["safety"]["workspace_clamped"]


def test_wrist_wrench_reads_zero_free_and_the_table_when_pressed():
    env = sim.make(
        "reach",
        controller="impedance",
        randomize={"joint_noise": 0.0},
        workspace_low=np.array([0.2, -0.45, -0.05]),  # let the fingertips reach the table
    )
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        obs = env.step(np.zeros(7, np.float32))[0]
    assert np.abs(obs["state/wrench"][:3]).max() < 0.5
    # Press the closed fingertips onto the table: the table pushes the hand up.
    a = np.zeros(7, np.float32)
    a[2], a[6] = -1.0, 1.0
    for _ in range(60):
        obs = env.step(a)[0]
    fz = obs["state/wrench"][2]
    # At rest the spring force is K_z * min(error, clip) = 2000 N/m * 0.02 m = 40 N.
    assert fz == pytest.approx(40.0, rel=0.1)


def test_images_on_request():
    env = sim.make("lift", controller="impedance", cameras=("front", "wrist"), image_size=(48, 64))
    obs, _ = env.reset(seed=0)
    for cam in ("front", "wrist"):
        img = obs[f"images/{cam}"]
        assert img.shape == (48, 64, 3) and img.dtype == np.uint8
        assert img.std() > 5  # not a blank frame
    assert env.observation_space.contains(obs)
    env.close()


def test_domain_randomisation_changes_physics():
    env = sim.make("lift", controller="impedance", randomize={"mass": 0.5, "friction": 0.5})
    cube = env.model.body("cube").id
    masses = set()
    for seed in range(3):
        env.reset(seed=seed)
        masses.add(round(float(env.model.body_mass[cube]), 6))
        assert 0.05 - 1e-9 <= env.model.body_mass[cube] <= 0.15 + 1e-9
    assert len(masses) == 3


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"controller": "pid"}, "controller"),
        ({"reward_type": "shaped"}, "reward_type"),
        ({"control_hz": 33}, "control_hz"),
        ({"cameras": ("top",)}, "camera"),
        ({"randomize": {"gravity": 1.0}}, "knob"),
    ],
)
def test_bad_configuration_is_a_clear_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PandaEnv(LiftTask(), **kwargs)


def test_dense_reward_in_unit_interval():
    env = sim.make("lift", controller="impedance", reward_type="dense")
    env.reset(seed=0)
    rewards = [env.step(env.action_space.sample())[1] for _ in range(5)]
    assert all(0.0 <= r <= 1.0 for r in rewards)

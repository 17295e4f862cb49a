"""Safety guard in the env: per-tick constraint costs, the reflex vetoing a ramming policy,
stiffness lowered in contact and restored, the filter still applied, counts."""

import numpy as np
import pytest
from reflex_weights import pushing_down_low_critic

import sim
from sim.risky_policy import RISKY_POLICIES

RAM = np.array([0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0], np.float32)  # straight down, holding


@pytest.fixture(scope="module")
def critic_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("reflex") / "critic.npz"
    np.savez(path, **pushing_down_low_critic(z_limit=0.16))
    return str(path)


def _ram(env, steps: int = 60, seed: int = 0) -> list[dict]:
    env.reset(seed=seed)
    return [env.step(RAM)[4]["safety"] for _ in range(steps)]


def test_default_env_has_only_the_filter() -> None:
    env = sim.make("peg_insert")
    env.reset(seed=0)
    info = env.step(RAM)[4]
    assert env.guard is None and "cost" not in info["safety"]
    env.close()


@pytest.mark.parametrize("controller", ["native", "impedance"])
def test_monitor_counts_force_violations_of_a_ramming_policy(controller) -> None:
    env = sim.make("peg_insert", safety="monitor", controller=controller)
    infos = _ram(env, steps=60)
    assert infos[0]["cost"] == 0 and infos[0]["features"].shape == (10,)
    hits = [s for s in infos if s["violation_force"]]
    assert len(hits) >= 10  # jammed on the block (or table) at K = 2000 N/m: > 30 N
    assert max(s["force_max"] for s in infos) > 60.0
    assert env.guard.counts["violation_force"] == len(hits)
    assert env.guard.counts["steps"] == 60 and env.guard.counts["reflex_steps"] == 0
    env.close()


def test_reflex_vetoes_ramming_and_nothing_is_violated(critic_path) -> None:
    env = sim.make("peg_insert", safety="reflex", safety_kwargs={"critic": critic_path})
    infos = _ram(env, steps=60)
    assert not any(s["violation_force"] for s in infos)
    assert max(s["force_max"] for s in infos) < 30.0
    vetoed = [s for s in infos if s["reflex"]]
    assert len(vetoed) >= 20 and all(s["risk"] > 0.3 for s in vetoed)
    assert env.guard.counts["reflex_steps"] == len(vetoed)
    assert env.guard.reflex.counts["interventions"] >= len(vetoed)
    # the arm stopped above the limit height instead of descending to the block (TCP ~0.09)
    assert env.data.site_xpos[env.guard._tcp][2] > 0.12
    # and every step still went through the deterministic filter (its flags are reported)
    assert all("step_limited" in s for s in infos)
    env.close()


def test_stiffness_lowered_only_in_contact_and_restored(critic_path) -> None:
    env = sim.make("peg_insert", safety="reflex", safety_kwargs={"critic": critic_path})
    nominal = env.controller.stiffness
    env.reset(seed=0)
    g = env.guard
    # free space: the first veto brakes the arm stiffly (a soft hold would coast further)
    info = env.step(RAM)[4]
    while not info["safety"]["reflex"]:
        info = env.step(RAM)[4]
    assert not info["safety"]["stiffness_lowered"]
    # in contact (a wall of force measured by the reflex): stiffness drops to 25 %
    pressed = g.features().copy()
    pressed[6:9] = [0.0, 0.0, 20.0]
    g.stage.begin(RAM)
    assert g.stage.tick(pressed) is not None and g.reflex.soften
    np.testing.assert_allclose(env.controller.stiffness, 0.25 * nominal)
    # safe commands: restored at the first one that starts with the wrist force below 5 N
    # (braking shows up in the F/T reading as inertial force for a step or two)
    for _ in range(5):
        env.step(np.array([0, 0, 0.5, 0, 0, 0, 1.0], np.float32))
        if env.controller.stiffness[0] == nominal[0]:
            break
    np.testing.assert_allclose(env.controller.stiffness, nominal)
    g.stage.begin(RAM)
    g.stage.tick(pressed)
    assert g.stage.stiffness_lowered
    env.reset(seed=1)  # and at every reset
    np.testing.assert_allclose(env.controller.stiffness, nominal)
    env.close()


def test_reflex_needs_a_matching_critic(critic_path) -> None:
    with pytest.raises(ValueError, match="needs critic"):
        sim.make("peg_insert", safety="reflex")
    with pytest.raises(ValueError, match="trained on features"):
        sim.make(
            "peg_insert",
            safety="reflex",
            safety_kwargs={"critic": critic_path, "task_keys": ("hole_pos",)},
        )
    with pytest.raises(ValueError, match="safety mode"):
        sim.make("peg_insert", safety="panic")


def test_risky_policies_act_in_range_and_expert_is_safe() -> None:
    env = sim.make("peg_insert", safety="monitor")
    rng = np.random.default_rng(0)
    for name, factory in RISKY_POLICIES.items():
        obs, _ = env.reset(seed=1)
        policy = factory(env, rng)
        for _ in range(5):
            a = policy(obs)
            assert a.shape == (7,) and np.all(np.abs(a) <= 1.0), name
            obs = env.step(a)[0]
    obs, _ = env.reset(seed=2)
    expert = sim.make_expert("peg_insert", env)
    done, costs, success = False, 0, False
    while not done:
        obs, _, term, trunc, info = env.step(expert(obs))
        costs += info["safety"]["cost"]
        success |= info["success"]
        done = term or trunc
    assert success and costs == 0
    env.close()


def test_slowing_zone_slows_the_descent_before_the_recovery(critic_path) -> None:
    # eps_soft 0.06 just above the critic's floor (0.047): the approach to z = 0.16 is slowed
    # (a speed cap falling with the risk), the stop above it still comes from the recovery
    kw = {"critic": critic_path, "soft_threshold": 0.06, "brake_time": 0.02}
    env = sim.make("peg_insert", safety="reflex", safety_kwargs=kw)
    sent: list[np.ndarray] = []
    env.guard.on_transition = lambda s, a, c, s2, done, mid: sent.append(a.copy())
    env.reset(seed=0)
    infos = [env.step(RAM)[4]["safety"] for _ in range(40)]
    r = env.guard.reflex
    assert r.counts["slows"] > 0 and r.counts["interventions"] > 0
    assert not any(s["violation_force"] for s in infos)
    # a step slowed from its first tick executes (and reports for online learning) the
    # slowed command: same direction, shorter
    slowed = [a for a in sent if 0.0 > a[2] > -1.0]
    assert slowed and all(abs(a[0]) < 1e-9 and a[6] == 1.0 for a in slowed)
    assert env.data.site_xpos[env.guard._tcp][2] > 0.12
    env.close()


LOOSEN = np.array([0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 0.0], np.float32)  # up, gripper half open


@pytest.mark.parametrize("release", ["task", None])
def test_the_reflex_keeps_the_peg_in_hand_above_the_release_height(critic_path, release) -> None:
    kw = {"critic": critic_path, "grasp_release_z": release}
    env = sim.make("peg_insert", safety="reflex", safety_kwargs=kw)
    obs, _ = env.reset(seed=0)
    drop0 = float((obs["state/peg_pos"] - obs["state/ee_pos"])[2])
    infos = [env.step(LOOSEN) for _ in range(10)]
    obs = infos[-1][0]
    slid = drop0 - float((obs["state/peg_pos"] - obs["state/ee_pos"])[2])  # [m] down the hand
    holds = sum(i[4]["safety"]["grasp_hold"] for i in infos)
    if release == "task":  # peg_insert's 0.08 m
        assert env.guard.grasp.release_z == 0.08 and holds == 10
        assert env.guard.counts["grasp_holds"] == 10 and abs(slid) < 1e-3
    else:
        assert env.guard.grasp is None and holds == 0 and slid > 0.01
    env.close()


def test_grasp_hold_needs_the_reflex() -> None:
    with pytest.raises(ValueError, match="needs safety='reflex'"):
        sim.make("peg_insert", safety="monitor", safety_kwargs={"grasp_release_z": 0.1})
    env = sim.make("peg_insert", safety="monitor")  # the task default applies to the reflex only
    assert env.guard.grasp is None
    env.close()

"""Reflex runtime: numpy critic equals the torch one, intervention logic, no torch, no
allocations per tick."""

import subprocess
import sys

import numpy as np
import pytest
from reflex_weights import OBS, pushing_down_low_critic

from controllers.reflex import NUM_CANDIDATES, Reflex, ReflexError, RiskMLP


def _feat(z: float, force: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> np.ndarray:
    f = np.zeros(OBS)
    f[:3] = (0.5, 0.0, z)
    f[6:9] = force
    return f


def test_numpy_critic_matches_torch_export(tmp_path) -> None:
    from robotrl.algos.safety_critic import SafetyCritic

    critic = SafetyCritic(OBS, 7, feature_names=["ee_pos", "ee_vel", "force", "gripper"], seed=3)
    rng = np.random.default_rng(0)
    critic.set_normalization(rng.normal(2.0, 3.0, (500, OBS)))
    path = critic.export(tmp_path / "c.npz")
    mlp = RiskMLP.from_file(path)
    feats = rng.normal(2.0, 3.0, OBS)
    acts = rng.uniform(-1, 1, (NUM_CANDIDATES, 7))
    mlp.set_features(feats)
    mlp.actions[:] = acts
    expected = critic.risk(np.repeat(feats[None], NUM_CANDIDATES, 0), acts)
    np.testing.assert_allclose(mlp.evaluate(), expected, atol=1e-6)
    # and back: a torch critic built from the export evaluates the same
    again = SafetyCritic.from_export(path)
    np.testing.assert_allclose(again.risk(feats[None], acts[:1]), expected[:1], atol=1e-6)


def test_reflex_intervenes_only_above_threshold_and_picks_lowest_risk() -> None:
    reflex = Reflex(RiskMLP(pushing_down_low_critic()), recovery="min_risk")
    down = np.array([0.2, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0])
    assert not reflex.tick(_feat(0.40), down, np.zeros(3))  # high above: allowed
    assert reflex.risk < 0.1 and np.array_equal(reflex.action, down)
    assert reflex.tick(_feat(0.10), down, np.array([0.0, 0.0, 8.0]))  # low, pushing: veto
    assert reflex.risk > 0.99
    # every candidate without downward motion has the same low risk: the first (hold) wins
    np.testing.assert_array_equal(reflex.action, [0, 0, 0, 0, 0, 0, 1.0])
    assert reflex.soften  # 8 N measured: in contact, lower the stiffness
    assert reflex.tick(_feat(0.10), down, np.zeros(3)) and not reflex.soften  # free space
    assert reflex.counts == {"ticks": 3, "interventions": 2, "slows": 0}
    # moving down at 0.2 m/s: "hold" brakes toward a target 2 cm above (0.1 s of motion back)
    hold = Reflex(RiskMLP(pushing_down_low_critic()), recovery="hold", brake_time=0.1)
    assert hold.tick(_feat(0.10), down, np.zeros(3), np.array([0.0, 0.0, -0.2]))
    np.testing.assert_allclose(hold.action, [0, 0, 1.0, 0, 0, 0, 1.0])


def test_yield_backs_off_along_the_force_in_contact_and_brakes_in_free_space() -> None:
    reflex = Reflex(RiskMLP(pushing_down_low_critic()), recovery="yield", brake_time=0.1)
    down = np.array([0.2, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0])
    moving = np.array([0.0, 0.0, -0.2])
    # in contact (the block pushes up and sideways with 10 N): move along that force
    force = np.array([6.0, 0.0, 8.0])
    assert reflex.tick(_feat(0.10, tuple(force)), down, force, moving)
    np.testing.assert_allclose(reflex.action, [0.6, 0, 0.8, 0, 0, 0, 1.0])
    assert reflex.soften
    # below the contact force (3 N): the brake, as recovery="hold" does
    weak = np.array([0.0, 0.0, 3.0])
    assert reflex.tick(_feat(0.10, tuple(weak)), down, weak, moving)
    np.testing.assert_allclose(reflex.action, [0, 0, 1.0, 0, 0, 0, 1.0])
    assert not reflex.soften


def test_reflex_fails_closed_on_nan_features() -> None:
    reflex = Reflex(RiskMLP(pushing_down_low_critic()))
    f = _feat(0.4)
    f[0] = np.nan
    assert reflex.tick(f, np.zeros(7), np.zeros(3))


def test_online_weight_load_and_shape_checks() -> None:
    mlp = RiskMLP(pushing_down_low_critic())
    w = pushing_down_low_critic(z_limit=0.5)
    mlp.load(w)
    reflex = Reflex(mlp)
    assert reflex.tick(_feat(0.40), np.array([0, 0, -1.0, 0, 0, 0, 0]), np.zeros(3))
    bad = dict(w)
    bad["q1.w0"] = np.zeros((5, 1))
    with pytest.raises(ReflexError, match="first layer"):
        RiskMLP(bad)
    with pytest.raises(ReflexError, match="threshold"):
        Reflex(RiskMLP(w), threshold=1.5)


_ALLOC_PROBE = """
import sys, tracemalloc
import numpy as np
from controllers.reflex import Reflex, RiskMLP
reflex = Reflex(RiskMLP.from_file(sys.argv[1]))
feats = np.zeros(int(sys.argv[2])); feats[:3] = (0.5, 0.0, 0.1)
force = np.array([0.0, 0.0, 8.0])
act = np.array([0.2, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0])
for _ in range(10):
    reflex.tick(feats, act, force)
tracemalloc.start()
before, _ = tracemalloc.get_traced_memory()
snap0 = tracemalloc.take_snapshot()
tracemalloc.reset_peak()
for _ in range(1000):
    reflex.tick(feats, act, force)
_, peak = tracemalloc.get_traced_memory()
snap1 = tracemalloc.take_snapshot()
only = [tracemalloc.Filter(True, "*controllers*reflex.py")]
grown = sum(d.size_diff for d in snap1.filter_traces(only).compare_to(
    snap0.filter_traces(only), "filename"))
print(grown, peak - before)
"""


def test_tick_allocates_nothing_that_survives_and_little_at_all(tmp_path) -> None:
    from robotrl.algos.safety_critic import SafetyCritic

    path = SafetyCritic(OBS, 7).export(tmp_path / "c.npz")  # hidden 64, 2 layers
    # a fresh interpreter with no other threads: tracemalloc's peak is process-wide, and the
    # test session's threads (e.g. a DDS participant) allocate while the reflex ticks
    out = subprocess.run(
        [sys.executable, "-c", _ALLOC_PROBE, str(path), str(OBS)],
        capture_output=True,
        text=True,
        check=True,
    )
    grown, peak = (int(v) for v in out.stdout.split())
    assert grown < 256  # nothing accumulates
    # no per-tick work arrays: the transient peak (numpy call overhead) stays below the size
    # of one hidden activation (5 x 64 float64 = 2560 bytes)
    assert peak < 2560


def test_reflex_module_does_not_import_torch() -> None:
    code = (
        "import sys, controllers.reflex, controllers.constraint_cost; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_slowing_zone_caps_fast_commands_in_proportion_to_the_risk() -> None:
    # risk of a full-speed descent at z = 0.14: sigmoid(20 * 0.1 - 3) = 0.269, between
    # eps_soft 0.1 and eps_safe 0.9 -> speed limit 1 - 0.8 * (0.269 - 0.1) / 0.8 = 0.831
    reflex = Reflex(
        RiskMLP(pushing_down_low_critic()), threshold=0.9, soft_threshold=0.1, slow_min=0.2
    )
    down = np.array([0.2, 0.0, -1.0, 0.1, 0.0, 0.0, 1.0])
    assert not reflex.tick(_feat(0.14), down, np.zeros(3))  # no recovery ...
    risk = 1.0 / (1.0 + np.exp(1.0))
    assert reflex.risk == pytest.approx(risk)
    limit = 1.0 - 0.8 * (risk - 0.1) / 0.8
    assert reflex.level == 1 and reflex.scale == pytest.approx(limit)  # ... but slowed
    np.testing.assert_allclose(reflex.action, [*(limit * down[:6]), 1.0])  # gripper kept
    assert not reflex.soften  # free space, soften="contact"
    assert reflex.counts == {"ticks": 1, "interventions": 0, "slows": 1}
    # the same risk with a command already below the speed limit passes unchanged (cap) ...
    slow = np.array([0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0])
    slow[:3] *= 0.5
    reflex.tick(_feat(0.04), slow, np.zeros(3))  # z = 0.04: h = 0.1 again at a_z = -0.5
    assert reflex.risk == pytest.approx(risk) and reflex.level == 0
    np.testing.assert_array_equal(reflex.action, slow)
    # ... and is multiplied by the limit with slowing="scale"; soften="always" in free space
    scaled = Reflex(
        RiskMLP(pushing_down_low_critic()),
        threshold=0.9,
        soft_threshold=0.1,
        slow_min=0.2,
        slowing="scale",
        soften="always",
    )
    scaled.tick(_feat(0.04), slow, np.zeros(3))
    np.testing.assert_allclose(scaled.action[:3], limit * slow[:3])
    assert scaled.level == 1 and scaled.soften
    # below eps_soft nothing happens; above eps_safe the recovery takes over
    assert not reflex.tick(_feat(0.40), down, np.zeros(3)) and reflex.level == 0
    assert reflex.tick(_feat(0.05), down, np.zeros(3)) and reflex.level == 2


@pytest.mark.parametrize("slow_in_contact", [True, False])
def test_slowing_in_contact_is_optional(slow_in_contact) -> None:
    reflex = Reflex(
        RiskMLP(pushing_down_low_critic()),
        threshold=0.9,
        soft_threshold=0.1,
        slow_min=0.2,
        slow_in_contact=slow_in_contact,
    )
    down = np.array([0.2, 0.0, -1.0, 0.1, 0.0, 0.0, 1.0])
    assert not reflex.tick(_feat(0.14), down, np.zeros(3))
    assert reflex.level == 1  # free space: slowed either way
    pressed = np.array([0.0, 0.0, 20.0])  # 20 N > CONTACT_FORCE
    assert not reflex.tick(_feat(0.14), down, pressed)
    if slow_in_contact:
        assert reflex.level == 1 and reflex.scale < 1.0
    else:  # contact is left to the recovery above eps_safe
        assert reflex.level == 0 and reflex.scale == 1.0
        np.testing.assert_array_equal(reflex.action, down)
    assert reflex.tick(_feat(0.05), down, pressed) and reflex.level == 2  # recovery: both


def test_soft_threshold_comes_from_the_export_and_is_checked() -> None:
    w = pushing_down_low_critic()
    w["soft_threshold"] = np.array(0.1)
    assert Reflex(RiskMLP(w)).soft_threshold == 0.1
    w["soft_threshold"] = np.array(0.0)  # 0: no slowing zone
    assert Reflex(RiskMLP(w)).soft_threshold is None
    with pytest.raises(ReflexError, match="soft_threshold"):
        Reflex(RiskMLP(w), soft_threshold=0.5)  # not below eps_safe 0.3
    with pytest.raises(ReflexError, match="slowing"):
        Reflex(RiskMLP(w), slowing="fast")


def test_slow_min_comes_from_the_export_unless_given(tmp_path) -> None:
    from controllers.reflex import SLOW_MIN
    from robotrl.algos.safety_critic import SafetyCritic, SafetyCriticConfig

    w = pushing_down_low_critic()
    w["soft_threshold"] = np.array(0.1)
    assert Reflex(RiskMLP(w)).slow_min == SLOW_MIN  # an export without one: the default
    w["slow_min"] = np.array(0.1)
    assert Reflex(RiskMLP(w)).slow_min == 0.1 and Reflex(RiskMLP(w), slow_min=0.5).slow_min == 0.5
    w["slow_min"] = np.array(1.5)
    with pytest.raises(ReflexError, match="slow_min"):
        Reflex(RiskMLP(w))
    cfg = SafetyCriticConfig(threshold=0.05, soft_threshold=0.01, slow_min=0.1)
    path = SafetyCritic(OBS, 7, cfg, feature_names=["ee_pos", "ee_vel", "force", "gripper"]).export(
        tmp_path / "c.npz"
    )
    assert RiskMLP.from_file(path).slow_min == 0.1
    assert SafetyCritic.from_export(path).cfg.slow_min == 0.1

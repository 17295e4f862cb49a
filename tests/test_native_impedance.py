"""The MuJoCo-native Cartesian impedance against the numpy law, and its force bound."""

import mujoco
import numpy as np
import pytest
from arm_sim import WALL, WALL_TOP, ArmSim, wall_force

from controllers import panda
from controllers.impedance import CartesianImpedance
from sim.arm import scene_xml
from sim.native_impedance import NativeCartesianImpedance

CONTROL_EVERY = 25  # physics steps per policy step (20 Hz control, 500 Hz physics)


class NativeSim:
    def __init__(self, objects: str = "", **kw) -> None:
        self.model = mujoco.MjModel.from_xml_string(scene_xml(objects, native_impedance=True))
        self.data = mujoco.MjData(self.model)
        self.data.qpos[:7] = panda.Q_HOME
        mujoco.mj_forward(self.model, self.data)
        self.ctl = NativeCartesianImpedance(self.model, self.data, **kw)
        self.ctl.reset()
        self.tcp = self.model.site("tcp").id
        self.pos0 = self.data.site_xpos[self.tcp].copy()
        self.rot0 = self.data.site_xmat[self.tcp].reshape(3, 3).copy()

    def run(self, target: np.ndarray, ticks: int, on_tick=None) -> np.ndarray:
        """Hold ``target`` (re-sent at 20 Hz like the env does); (ticks, 3) TCP positions."""
        out = np.zeros((ticks, 3))
        for k in range(ticks):
            if k % CONTROL_EVERY == 0:
                assert self.ctl.set_target(target, self.rot0)
            mujoco.mj_step(self.model, self.data)
            out[k] = self.data.site_xpos[self.tcp]
            if on_tick is not None:
                on_tick(k)
        return out


def _numpy_run(step: np.ndarray, ticks: int, **kw) -> tuple[np.ndarray, np.ndarray]:
    sim = ArmSim(CartesianImpedance(**kw))
    target = sim.state.ee_pos + step
    sim.ctl.set_target(target, sim.state.ee_rot.copy())
    return sim.run(ticks), target


def test_default_scene_unchanged() -> None:
    plain = mujoco.MjModel.from_xml_string(scene_xml())
    native = mujoco.MjModel.from_xml_string(scene_xml(native_impedance=True))
    assert plain.nu == 8 and native.nu == 8 + 6 + 7 and plain.nmocap == 0
    with pytest.raises(ValueError, match="native_impedance=True"):
        NativeCartesianImpedance(plain, mujoco.MjData(plain))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_task_law_agrees_with_numpy(axis: int) -> None:
    """Posture off on both: a 5 mm step gives TCP paths within 0.3 mm over 1 s (measured 0.13)."""
    step = np.zeros(3)
    step[axis] = 0.005
    kw = {"nullspace_stiffness": 0.0, "nullspace_damping": 0.0}
    xs_np, target = _numpy_run(step, 500, **kw)
    sim = NativeSim(**kw)
    xs_native = sim.run(sim.pos0 + step, 500)
    assert np.allclose(target, sim.pos0 + step)
    assert np.max(np.abs(xs_np - xs_native)) < 0.3e-3


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_defaults_converge_and_stay_close_to_numpy(axis: int) -> None:
    """With the posture task on (native posture damping unprojected, so lighter: 1.0 instead of
    6.3 Nm s/rad), paths of a 5 mm step stay within 0.8 mm (measured 0.52); both converge."""
    step = np.zeros(3)
    step[axis] = 0.005
    xs_np, target = _numpy_run(step, 500)
    sim = NativeSim()
    xs_native = sim.run(target, 500)
    assert np.linalg.norm(xs_native[-1] - target) < 0.5e-3
    assert np.linalg.norm(xs_np[-1] - target) < 0.5e-3
    assert np.max(np.abs(xs_np - xs_native)) < 0.8e-3


def test_wall_force_bounded_by_k_times_clip() -> None:
    sim = NativeSim(objects=WALL)
    target = sim.pos0 + np.array([0.0, 0.0, WALL_TOP - sim.pos0[2] - 0.1])
    forces = []
    sim.run(target, 750, on_tick=lambda k: forces.append(wall_force(sim.model, sim.data)))
    steady = np.array(forces[-250:])
    bound = sim.ctl.stiffness[2] * 0.01
    assert np.all(steady[:, 2] <= bound + 0.3)
    assert steady[:, 2].mean() > 0.9 * bound


def test_stiffness_target_filter_and_nan() -> None:
    sim = NativeSim()
    ctl, m = sim.ctl, sim.model
    applied = ctl.set_stiffness(np.array([5000.0, 100.0, 600.0, 1e9, 1.0, np.nan]))
    assert np.array_equal(applied, [2000.0, 150.0, 600.0, 150.0, 10.0, 40.0])
    assert np.array_equal(ctl.stiffness, applied)
    act = [m.actuator(f"impedance_{a}").id for a in ("x", "y", "z", "rx", "ry", "rz")]
    clip = np.array([0.01] * 3 + [0.05] * 3)
    assert np.allclose(m.actuator_forcerange[act, 1], applied * clip)
    assert np.allclose(m.actuator_biasprm[act, 2], -2 * np.sqrt(applied))
    assert not ctl.set_target(np.array([np.nan, 0, 0]), sim.rot0)
    assert ctl.rejected_targets == 1
    # the target filter lives in the activations: the effective target starts at the old one
    # (act = old - new) and decays to the new one within ~0.05 s
    new = sim.pos0 + np.array([0.01, 0.0, 0.0])
    ctl.set_target(new, sim.rot0)
    adr = m.actuator_actadr[act]
    assert np.allclose(sim.data.act[adr[:3]], [-0.01, 0.0, 0.0])
    for _ in range(25):
        mujoco.mj_step(m, sim.data)
    assert np.all(np.abs(sim.data.act[adr]) < 1e-4)
    assert np.allclose(ctl.target_pos, new)

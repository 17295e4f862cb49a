"""Per-call cost of the numpy controllers and per-control-step cost of numpy vs native backends.

Prints one JSON object. Run: ``python bench/controller.py``.
"""

from __future__ import annotations

import json
import time

import mujoco
import numpy as np

from controllers import panda
from controllers.arm_state import ArmState
from controllers.impedance import CartesianImpedance
from controllers.joint_impedance import JointImpedance
from controllers.operational_space import OperationalSpace
from controllers.safety_filter import SafetyFilter
from sim.arm import scene_xml
from sim.arm_reader import MjArmReader
from sim.native_impedance import NativeCartesianImpedance

SUBSTEPS = 25  # 500 Hz physics, 20 Hz control


def _per_call_us(fn, n: int = 20000) -> float:
    for _ in range(200):
        fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def _home_sim(native: bool) -> tuple[mujoco.MjModel, mujoco.MjData]:
    m = mujoco.MjModel.from_xml_string(scene_xml(native_impedance=native))
    d = mujoco.MjData(m)
    d.qpos[:7] = panda.Q_HOME
    mujoco.mj_forward(m, d)
    return m, d


def main() -> None:
    m, d = _home_sim(False)
    reader = MjArmReader(m, with_mass=True)
    state = reader.read(d, ArmState())
    state.dq[:] = 0.1
    out: dict[str, float] = {}
    for name, ctl in (
        ("cartesian_impedance", CartesianImpedance()),
        ("joint_impedance", JointImpedance()),
        ("operational_space", OperationalSpace()),
    ):
        ctl.reset(state)
        if name == "joint_impedance":
            ctl.set_target(state.q + 0.01)
        else:
            ctl.set_target(state.ee_pos + 0.003, state.ee_rot)
        out[f"{name}_compute_us"] = _per_call_us(lambda c=ctl: c.compute(state))
    ctl = CartesianImpedance()
    ctl.reset(state)

    def filtering() -> None:  # a new target every tick: the low-pass filters run too
        ctl.set_target(state.ee_pos + 0.003, state.ee_rot)
        ctl.compute(state)

    out["cartesian_impedance_set_target_and_compute_us"] = _per_call_us(filtering)
    filt = SafetyFilter(np.array([0.2, -0.4, 0.05]), np.array([0.8, 0.4, 0.7]))
    tau = np.ones(7)
    out["safety_filter_torque_us"] = _per_call_us(
        lambda: filt.filter_torque(tau, state.q, state.dq)
    )
    out["mj_arm_reader_us"] = _per_call_us(lambda: MjArmReader.read(reader, d, state), 5000)

    # One control step = 25 physics steps; numpy: read state + compute + filter per tick.
    m, d = _home_sim(False)
    reader, state, ctl = MjArmReader(m), ArmState(), CartesianImpedance()
    mujoco.mj_step1(m, d)
    ctl.reset(reader.read(d, state))
    target = state.ee_pos + 0.003

    def numpy_step() -> None:
        ctl.set_target(target, state.ee_rot)
        for _ in range(SUBSTEPS):
            reader.read(d, state)
            d.ctrl[:7] = filt.filter_torque(ctl.compute(state), state.q, state.dq)
            mujoco.mj_step2(m, d)
            mujoco.mj_step1(m, d)

    out["numpy_control_step_us"] = _per_call_us(numpy_step, 400)

    mn, dn = _home_sim(True)
    native = NativeCartesianImpedance(mn, dn)
    native.reset()
    rot = dn.site_xmat[mn.site("tcp").id].reshape(3, 3).copy()
    target_n = dn.site_xpos[mn.site("tcp").id] + 0.003

    def native_step() -> None:
        native.set_target(target_n, rot)
        mujoco.mj_step(mn, dn, nstep=SUBSTEPS)

    out["native_control_step_us"] = _per_call_us(native_step, 2000)
    mr, dr = _home_sim(False)
    out["raw_mj_step_us"] = _per_call_us(lambda: mujoco.mj_step(mr, dr), 20000)
    out["native_mj_step_us"] = _per_call_us(lambda: mujoco.mj_step(mn, dn), 20000)
    out["speedup_native_vs_numpy"] = out["numpy_control_step_us"] / out["native_control_step_us"]
    print(json.dumps({k: round(v, 2) for k, v in out.items()}))


if __name__ == "__main__":
    main()

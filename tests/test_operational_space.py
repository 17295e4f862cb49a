"""Operational-space control: the inertia-weighted law and a step on the MuJoCo Panda."""

import numpy as np
from arm_sim import ArmSim

from controllers import panda
from controllers.arm_state import ArmState
from controllers.kinematics import panda_chain
from controllers.operational_space import OperationalSpace
from controllers.rotations import orientation_error, rotvec_to_mat


def test_law_matches_direct_formula() -> None:
    rng = np.random.default_rng(0)
    chain = panda_chain()
    for _ in range(10):
        q = rng.uniform(panda.Q_MIN + 0.2, panda.Q_MAX - 0.2)
        s = ArmState.from_kinematics(chain, q, rng.normal(0, 0.3, 7))
        a = rng.normal(size=(7, 7))
        s.mass[:] = a @ a.T + 0.5 * np.eye(7)
        ctl = OperationalSpace(
            filter_alpha=1.0, error_clip=np.full(6, 10.0), tau_max=np.full(7, 1e6), dtau_max=1e12
        )
        ctl.reset(s)
        pos = s.ee_pos + rng.normal(0, 0.01, 3)
        rot = rotvec_to_mat(rng.normal(0, 0.05, 3)) @ s.ee_rot
        ctl.set_target(pos, rot)
        tau = ctl.compute(s).copy()
        j, minv = s.jac, np.linalg.inv(s.mass)
        lam = np.linalg.inv(j @ minv @ j.T + 1e-3 * np.eye(6))
        k = ctl.stiffness
        e = np.concatenate([s.ee_pos - pos, orientation_error(s.ee_rot, rot)])
        f = lam @ (-k * e - 2 * np.sqrt(k) * (j @ s.dq))
        jbar = minv @ j.T @ lam
        t0 = 10.0 * (panda.Q_HOME - s.q) - 2 * np.sqrt(10.0) * s.dq
        expected = j.T @ f + (np.eye(7) - j.T @ jbar.T) @ t0 + s.coriolis
        assert np.allclose(tau, expected, rtol=1e-8, atol=1e-8)


def test_step_is_near_critically_damped_in_mujoco() -> None:
    """Inertia weighting makes D = 2 sqrt(K) critical: a 5 mm step overshoots < 5 %."""
    sim = ArmSim(OperationalSpace())
    assert sim.ctl.needs_mass
    for axis in range(3):
        step = np.zeros(3)
        step[axis] = 0.005
        target = sim.data.site_xpos[sim.tcp] + step
        sim.ctl.set_target(target, sim.ctl.target_rot)
        xs = sim.run(500)
        assert np.linalg.norm(xs[-1] - target) < 0.5e-3
        assert float(np.max((xs - target) @ step)) / 0.005**2 < 0.05

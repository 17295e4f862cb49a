"""Test helper (not a test module): a hand-made risk critic in the export layout of
:meth:`robotrl.algos.safety_critic.SafetyCritic.weights`, so reflex tests know the answer."""

import numpy as np

OBS = 10  # ee_pos, ee_vel, force, gripper


def pushing_down_low_critic(z_limit: float = 0.15) -> dict[str, np.ndarray]:
    """Hand-made weights: risk ~1 when the action pushes down (a_z = -1) with the TCP below
    ``z_limit`` [m], ~0.05 otherwise: h = relu(-10 z - 2 a_z + 10 z_limit - 2), q = 20 h - 3."""
    w0 = np.zeros((OBS + 7, 1))
    w0[2, 0] = -10.0  # TCP height
    w0[OBS + 2, 0] = -2.0  # commanded z motion
    b0 = np.array([10.0 * z_limit - 2.0])  # at a_z = -1: h > 0 iff z < z_limit
    w1, b1 = np.array([[20.0]]), np.array([-3.0])
    out = {"mean": np.zeros(OBS), "std": np.ones(OBS), "threshold": np.array(0.3)}
    out.update(
        {
            "act_dim": np.array(7),
            "feature_names": np.array(["ee_pos", "ee_vel", "force", "gripper"]),
        }
    )
    for h in ("q1", "q2"):
        out.update({f"{h}.w0": w0, f"{h}.b0": b0, f"{h}.w1": w1, f"{h}.b1": b1})
    return out

"""Franka Emika Panda: published kinematic, dynamic and limit parameters.

Kinematics use the modified (Craig) Denavit-Hartenberg convention of Franka's control
parameter documentation: the transform from frame i-1 to frame i is
``Rx(alpha_{i-1}) Tx(a_{i-1}) Rz(q_i) Tz(d_i)``. Lengths in metres, angles in radians.
Link masses are the identified values of Gaz et al. (RA-L 2019).
"""

from __future__ import annotations

import numpy as np

NUM_JOINTS = 7

# Rows: (a_{i-1} [m], d_i [m], alpha_{i-1} [rad]) for joints 1..7, then the flange (q = 0).
DH_A = np.array([0.0, 0.0, 0.0, 0.0825, -0.0825, 0.0, 0.088, 0.0])
DH_D = np.array([0.333, 0.0, 0.316, 0.0, 0.384, 0.0, 0.0, 0.107])
DH_ALPHA = np.array([0.0, -np.pi / 2, np.pi / 2, np.pi / 2, -np.pi / 2, np.pi / 2, np.pi / 2, 0.0])

Q_MIN = np.array([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973])
Q_MAX = np.array([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973])
DQ_MAX = np.array([2.1750, 2.1750, 2.1750, 2.1750, 2.6100, 2.6100, 2.6100])  # [rad/s]
DDQ_MAX = np.array([15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0])  # [rad/s^2]
TAU_MAX = np.array([87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0])  # [Nm]
DTAU_MAX = 1000.0  # torque rate limit [Nm/s]
LINK_MASS = np.array([4.970684, 0.646926, 3.228604, 3.587895, 1.225946, 1.666555, 0.735522])  # [kg]

HAND_MASS = 0.73  # [kg]
HAND_YAW = -np.pi / 4  # hand frame rotated about the flange z axis [rad]
TCP_OFFSET = 0.1034  # tool centre point beyond the flange, along flange z [m]
FINGER_TRAVEL = 0.04  # per finger [m]; 0.08 m max opening
GRASP_FORCE = 70.0  # continuous grasp force [N]

Q_HOME = np.array([0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4])

CART_VEL_MAX = 1.7  # translational [m/s]
CART_ROT_VEL_MAX = 2.5  # rotational [rad/s]
CONTROL_PERIOD = 0.001  # libfranka control period [s]

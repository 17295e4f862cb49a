"""The simulated Franka Panda: our own MJCF, built from primitive geoms and the public parameters.

Kinematics come from ``controllers.panda`` (the same numbers the hardware path uses), so the
simulated arm and ``controllers.kinematics`` cannot drift apart. Joints are torque-controlled
(``motor`` actuators clipped at the Panda's torque limits); the two fingers are coupled and
driven by one position servo with the hand's grasp force as its force limit. Every arm body
has ``gravcomp="1"``: like the real robot, the sim compensates the arm's own weight, so the
controller law in sim and on hardware is the same (payloads are not compensated).

Names a task can rely on: joints ``joint1..joint7``, ``finger_left``/``finger_right``; sites
``tcp`` (tool centre point, hand frame) and ``ft`` (wrist force/torque sensor, flange);
sensors ``ft_force``/``ft_torque``; cameras ``front`` (world) and ``wrist`` (hand);
actuators ``torque1..torque7`` and ``gripper``; bodies ``link0..link7``, ``hand``.
"""

from __future__ import annotations

import numpy as np

from controllers import panda

PHYSICS_DT = 0.002  # [s]: 500 Hz physics
NOSLIP_ITERATIONS = 2  # removes the creep of soft friction: a grasped peg stays put
ARM_CONTYPE, WORLD_CONTYPE = 2, 1  # arm links collide with the world and objects, not each other
_LINK_RADIUS = (0.065, 0.06, 0.06, 0.06, 0.055, 0.05, 0.045)


def _fmt(v: np.ndarray | list[float] | tuple[float, ...]) -> str:
    return " ".join(f"{x:.12g}" for x in v)


def _link_body(i: int, inner: str) -> str:
    """Body for joint i+1 (0-based i) with a capsule to its child and the identified mass."""
    a, d, alpha = panda.DH_A[i], panda.DH_D[i], panda.DH_ALPHA[i]
    pos = (a, -d * np.sin(alpha), d * np.cos(alpha))
    quat = (np.cos(alpha / 2), np.sin(alpha / 2), 0.0, 0.0)
    # The child frame in this body's frame (the flange for link 7): the link runs towards it.
    ca, cd, calpha = panda.DH_A[i + 1], panda.DH_D[i + 1], panda.DH_ALPHA[i + 1]
    child = np.array((ca, -cd * np.sin(calpha), cd * np.cos(calpha)))
    r = _LINK_RADIUS[i]
    if np.linalg.norm(child) > 0.02:
        shape = f'type="capsule" fromto="0 0 0 {_fmt(child)}"'
    elif i == 0:  # link 1 hangs below its joint frame, down to the base
        shape = 'type="capsule" fromto="0 0 -0.19 0 0 0"'
    else:
        shape = 'type="sphere" pos="0 0 0"'
    lo, hi = panda.Q_MIN[i], panda.Q_MAX[i]
    return f"""
<body name="link{i + 1}" pos="{_fmt(pos)}" quat="{_fmt(quat)}" gravcomp="1">
  <joint name="joint{i + 1}" axis="0 0 1" range="{lo} {hi}" class="arm"/>
  <geom name="link{i + 1}_geom" {shape} size="{r}" mass="{panda.LINK_MASS[i]}" class="arm"/>
  {inner}
</body>"""


def _hand() -> str:
    flange = panda.DH_D[-1]
    yaw = panda.HAND_YAW
    quat = (np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2))
    finger_z = 0.0584
    pad_z = panda.TCP_OFFSET - finger_z - 0.01
    return f"""
<body name="hand" pos="0 0 {flange}" quat="{_fmt(quat)}" gravcomp="1">
  <site name="ft" pos="0 0 0" size="0.01" rgba="1 0 0 0.3"/>
  <site name="tcp" pos="0 0 {panda.TCP_OFFSET}" size="0.006" rgba="0 1 0 0.5"/>
  <geom name="hand_geom" type="box" pos="0 0 0.03" size="0.03 0.095 0.028" mass="{panda.HAND_MASS}"
        class="arm"/>
  <camera name="wrist" pos="0.08 0 0.02" xyaxes="0 -1 0 -0.78 0 -0.62" fovy="75"/>
  <body name="finger_left" pos="0 0 {finger_z}" gravcomp="1">
    <joint name="finger_left" type="slide" axis="0 1 0" range="0 {panda.FINGER_TRAVEL}"
           class="finger"/>
    <geom name="finger_left_pad" type="box" pos="0 0.007 {pad_z}" size="0.01 0.007 0.022"
          class="pad"/>
  </body>
  <body name="finger_right" pos="0 0 {finger_z}" gravcomp="1">
    <joint name="finger_right" type="slide" axis="0 -1 0" range="0 {panda.FINGER_TRAVEL}"
           class="finger"/>
    <geom name="finger_right_pad" type="box" pos="0 -0.007 {pad_z}" size="0.01 0.007 0.022"
          class="pad"/>
  </body>
</body>"""


def arm_body(base_pos: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> str:
    """MJCF ``<body>`` of the arm (base link, 7 links, hand and fingers) for a worldbody."""
    inner = _hand()
    for i in reversed(range(panda.NUM_JOINTS)):
        inner = _link_body(i, inner)
    return f"""
<body name="link0" pos="{_fmt(base_pos)}">
  <geom name="link0_geom" type="cylinder" fromto="0 0 0 0 0 0.14" size="0.09" class="arm"/>
  {inner}
</body>"""


def arm_defaults() -> str:
    """MJCF ``<default>`` classes used by :func:`arm_body`."""
    return f"""
<default class="arm">
  <joint damping="0.1" armature="0.1" limited="true"/>
  <geom contype="{ARM_CONTYPE}" conaffinity="{WORLD_CONTYPE}" rgba="0.92 0.92 0.95 1"
        group="0"/>
</default>
<default class="finger">
  <joint damping="2" armature="0.1" limited="true"/>
</default>
<default class="pad">
  <geom contype="{ARM_CONTYPE}" conaffinity="{WORLD_CONTYPE}" mass="0.015" condim="4"
        friction="1.5 0.01 0.002" solref="0.004 1" solimp="0.95 0.99 0.001" rgba="0.2 0.2 0.2 1"
        priority="1"/>
</default>"""


def arm_actuators() -> str:
    """Torque motors for the 7 joints and the gripper servo (``ctrl`` = each finger's travel [m]).

    The servo drives the left finger; an equality constraint makes the right one mirror it.
    """
    motors = "\n".join(
        f'<motor name="torque{i + 1}" joint="joint{i + 1}" ctrllimited="true" '
        f'ctrlrange="{-panda.TAU_MAX[i]} {panda.TAU_MAX[i]}"/>'
        for i in range(panda.NUM_JOINTS)
    )
    kp = 10000.0  # [N/m]: any object over 7 mm wide is squeezed with the full grasp force
    return f"""
<equality>
  <joint joint1="finger_right" joint2="finger_left" polycoef="0 1 0 0 0" solref="0.005 1"/>
</equality>
<actuator>
  {motors}
  <general name="gripper" joint="finger_left" ctrllimited="true"
           ctrlrange="0 {panda.FINGER_TRAVEL}" forcelimited="true"
           forcerange="{-panda.GRASP_FORCE} {panda.GRASP_FORCE}" gainprm="{kp}"
           biastype="affine" biasprm="0 -{kp} -40"/>
</actuator>
<sensor>
  <force name="ft_force" site="ft"/>
  <torque name="ft_torque" site="ft"/>
</sensor>"""


def scene_xml(
    objects: str = "",
    assets: str = "",
    extra: str = "",
    name: str = "panda_scene",
    native_impedance: bool = False,
) -> str:
    """A full MJCF scene: table plane, lights, front camera, the arm and the given objects.

    Args:
        objects: MJCF elements placed in ``<worldbody>`` (task objects, fixtures).
        assets: extra ``<asset>`` children.
        extra: extra top-level elements (``<equality>``, ``<contact>``...).
        native_impedance: also add the mocap target and actuators of
            :mod:`sim.native_impedance` (MuJoCo evaluates the Cartesian impedance law).
    """
    if native_impedance:  # imported here: it needs mujoco, which building XML does not
        from sim.native_impedance import native_impedance_actuators, native_impedance_worldbody

        objects = objects + native_impedance_worldbody()
        extra = extra + native_impedance_actuators()
    return f"""
<mujoco model="{name}">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="{PHYSICS_DT}" integrator="implicitfast" cone="elliptic" impratio="5"
          noslip_iterations="{NOSLIP_ITERATIONS}"/>
  <visual><global offwidth="640" offheight="480"/><quality shadowsize="1024"/></visual>
  <default>
    {arm_defaults()}
    <default class="object">
      <geom contype="{WORLD_CONTYPE}" conaffinity="{WORLD_CONTYPE | ARM_CONTYPE}" condim="4"
            friction="1 0.01 0.002" solref="0.004 1" solimp="0.95 0.99 0.001"/>
    </default>
  </default>
  <asset>
    <texture name="grid" type="2d" builtin="checker" rgb1="0.55 0.45 0.35" rgb2="0.5 0.4 0.3"
             width="256" height="256"/>
    <material name="table" texture="grid" texrepeat="4 4"/>
    {assets}
  </asset>
  <worldbody>
    <light pos="0.5 0 1.5" dir="0 0 -1" diffuse="0.8 0.8 0.8"/>
    <light pos="1.5 1 1.5" dir="-1 -0.6 -1" diffuse="0.3 0.3 0.3"/>
    <geom name="table" type="plane" size="1.5 1.5 0.05" material="table"
          contype="{WORLD_CONTYPE}" conaffinity="{WORLD_CONTYPE | ARM_CONTYPE}"/>
    <camera name="front" pos="1.3 -0.8 0.9" xyaxes="0.625 0.781 0 -0.383 0.306 0.872" fovy="45"/>
    {arm_body()}
    {objects}
  </worldbody>
  {arm_actuators()}
  {extra}
</mujoco>"""

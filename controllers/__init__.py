"""Real-time control: kinematics, impedance controllers and the deterministic safety filter.

Everything here is plain numpy (no torch, no simulator), allocates its work arrays once and can
run inside a 1 kHz loop on the robot PC.
"""

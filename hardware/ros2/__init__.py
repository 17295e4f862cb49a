"""ROS 2 hardware path: wire-compatible messages and transport, sim robot node, bridge / robot
env, policy node (and, from part B, node config, teleop, recorder)."""

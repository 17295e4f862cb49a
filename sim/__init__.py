"""Simulation: the MuJoCo Panda, manipulation tasks, scripted experts and vector envs."""

"""Manipulation tasks for the simulated Panda, one module each."""

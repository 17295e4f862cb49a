"""RL algorithms: residual off-policy RL, flow policy gradients, safety critic, reward model."""

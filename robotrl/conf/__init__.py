"""Hydra configs (composed only by the CLI). Groups: task, controller."""

"""robotrl: reinforcement learning for real robot arms and VLA policies."""

__version__ = "0.1.0"

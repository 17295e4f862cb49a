"""Datasets: the crash-safe zarr episode store, BC sequence samplers and RL replay buffers."""

from robotrl.datasets.episode_store import EpisodeStore, EpisodeStoreError, repair, verify
from robotrl.datasets.episode_writer import EpisodeWriter
from robotrl.datasets.replay_buffer import MixedReplay, ReplayBuffer
from robotrl.datasets.sampler import (
    SequenceDataset,
    compute_stats,
    make_dataloader,
    split_episodes,
)

__all__ = [
    "EpisodeStore",
    "EpisodeStoreError",
    "EpisodeWriter",
    "MixedReplay",
    "ReplayBuffer",
    "SequenceDataset",
    "compute_stats",
    "make_dataloader",
    "repair",
    "split_episodes",
    "verify",
]

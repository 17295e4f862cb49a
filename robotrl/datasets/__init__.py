"""Datasets: the crash-safe zarr episode store, BC sequence samplers and RL replay buffers."""

from robotrl.datasets.episode_store import EpisodeStore, EpisodeStoreError
from robotrl.datasets.episode_writer import EpisodeWriter
from robotrl.datasets.store_check import repair, verify

__all__ = ["EpisodeStore", "EpisodeStoreError", "EpisodeWriter", "repair", "verify"]

"""Training-read throughput: robotrl's SequenceDataset vs lerobot's LeRobotDataset, same data.

Builds an episode store (state + two sim-like cameras), exports it with
:func:`robotrl.datasets.lerobot_format.export_lerobot`, then times shuffled batches of 64
samples with obs horizon To=2 and action horizon Ta=16 from both, through a torch DataLoader
with the same batch size and num_workers. LeRobot gets the horizons as ``delta_timestamps``
(observations at -1/fps and 0, actions at 0 .. 15/fps). Prints one JSON object.

Run it in the lerobot venv (``.ci/lerobot_env.sh``)::

    /work/.venv-lerobot/bin/python bench/lerobot_read.py [--episodes 50] [--steps 100]
        [--size 96] [--num-workers 0] [--video] [--out DIR]

What each side does per sample: robotrl (cached) fancy-indexes arrays decoded into RAM once;
robotrl (zarr) reads blosc chunks from the store per batch; LeRobot reads arrow rows
(memory-mapped) and decodes a PNG per camera and step (or seeks MP4 with ``--video``), and
converts images to float32 CHW in [0, 1].
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

# bench/datasets.py would shadow Hugging Face `datasets` (which lerobot imports): drop this
# script's directory from the import path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

FPS = 20
TO, TA, BATCH = 2, 16, 64
STATE = {"state/ee_pos": 3, "state/joint_pos": 7}
CAMERAS = ("front", "wrist")


def _frames(rng: np.random.Generator, steps: int, size: int, cam: int) -> np.ndarray:
    """(steps, size, size, 3) uint8 sim-like frames: shading, a moving disc, mild noise."""
    yy, xx = np.mgrid[0:size, 0:size]
    base = np.stack([xx * 0.8, yy * 0.6, (xx + yy) * 0.3], -1) * (128 / size)
    out = np.empty((steps, size, size, 3), np.uint8)
    for t in range(steps):
        img = base.copy()
        cx, cy = (size // 4 + 2 * t + 30 * cam) % size, size // 2 + 10 * cam
        img[(xx - cx) ** 2 + (yy - cy) ** 2 < (size // 8) ** 2] = (200, 40, 40)
        out[t] = np.clip(img + rng.normal(0, 2, img.shape), 0, 255)
    return out


def _build_store(path: Path, episodes: int, steps: int, size: int) -> None:
    from robotrl.datasets import EpisodeStore

    rng = np.random.default_rng(0)
    with EpisodeStore.create(path, fps=FPS, robot="panda", durable=False) as store:
        for e in range(episodes):
            frames = [_frames(rng, steps, size, cam) for cam in range(len(CAMERAS))]
            with store.begin_episode(task="lift", language="pick up the cube") as w:
                for t in range(steps):
                    obs = {k: rng.standard_normal(d).astype(np.float32) for k, d in STATE.items()}
                    obs |= {f"images/{c}": frames[i][t] for i, c in enumerate(CAMERAS)}
                    action = rng.uniform(-1, 1, 7).astype(np.float32)
                    w.add(obs, action, {}, timestamp=t / FPS)
                w.commit(success=bool(e % 2))


class _Stream:
    """Endless batches from a DataLoader (a new epoch when one ends); the first batch, which
    pays for worker start-up, is drawn at construction."""

    def __init__(self, loader: Iterable) -> None:
        self.loader = loader
        self.it = iter(loader)
        self.first = self.next()

    def next(self) -> Any:
        try:
            return next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            return next(self.it)

    def time(self, batches: int) -> tuple[float, float]:
        """(wall s, main-process CPU s) per batch over ``batches`` batches."""
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(batches):
            self.next()
        return (time.perf_counter() - w0) / batches, (time.process_time() - c0) / batches


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--steps", type=int, default=100, help="steps per episode")
    parser.add_argument("--size", type=int, default=96, help="camera height = width [px]")
    parser.add_argument("--num-workers", type=int, default=0, help="DataLoader workers (both)")
    parser.add_argument("--batches", type=int, default=10, help="LeRobot batches per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument("--video", action="store_true", help="export cameras as MP4")
    parser.add_argument("--out", type=Path, default=None, help="keep the datasets here")
    args = parser.parse_args()

    root = args.out or Path(tempfile.mkdtemp(prefix="bench_lerobot_"))
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_CACHE"] = str(root / "hf_datasets_cache")  # before datasets loads
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from torch.utils.data import DataLoader

    from robotrl.datasets import EpisodeStore, SequenceDataset, make_dataloader
    from robotrl.datasets.lerobot_format import export_lerobot

    torch.manual_seed(0)
    result: dict = {
        "episodes": args.episodes,
        "steps": args.steps,
        "cameras": len(CAMERAS),
        "image_size": args.size,
        "batch": BATCH,
        "obs_horizon": TO,
        "action_horizon": TA,
        "num_workers": args.num_workers,
        "lerobot_images": "video (h264 mp4, pyav)" if args.video else "image (png in parquet)",
        "torch": torch.__version__,
    }
    t0 = time.perf_counter()
    _build_store(root / "store.zarr", args.episodes, args.steps, args.size)
    result["build_store_s"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    lr_root = export_lerobot(root / "store.zarr", root / "lerobot", video=args.video)
    result["export_s"] = round(time.perf_counter() - t0, 1)
    result["disk_mb"] = {
        "zarr": round(_dir_bytes(root / "store.zarr") / 2**20, 1),
        "lerobot": round(_dir_bytes(lr_root) / 2**20, 1),
    }

    store = EpisodeStore.open(root / "store.zarr")
    obs_keys = [*STATE, *(f"images/{c}" for c in CAMERAS)]
    streams: dict[str, tuple[_Stream, int]] = {}  # name -> (stream, batches per round)
    setup: dict[str, float] = {}
    for name, cache_bytes, batches in (("robotrl_cached", 8 << 30, 50), ("robotrl_zarr", 0, 5)):
        t0 = time.perf_counter()
        ds = SequenceDataset(store, obs_keys, TO, TA, cache_bytes=cache_bytes)
        setup[name] = time.perf_counter() - t0
        loader = make_dataloader(ds, BATCH, seed=0, num_workers=args.num_workers)
        streams[name] = (_Stream(loader), batches)

    obs_dt = [(i - TO + 1) / FPS for i in range(TO)]
    delta = {"observation.state": obs_dt, "action": [i / FPS for i in range(TA)]}
    delta |= {f"observation.images.{c}": obs_dt for c in CAMERAS}
    t0 = time.perf_counter()
    lr = LeRobotDataset("local/robotrl", root=lr_root, delta_timestamps=delta, video_backend="pyav")
    setup["lerobot"] = time.perf_counter() - t0
    loader = DataLoader(
        lr,
        batch_size=BATCH,
        shuffle=True,
        drop_last=True,
        num_workers=args.num_workers,
        generator=torch.Generator().manual_seed(0),
    )
    streams["lerobot"] = (_Stream(loader), args.batches)
    first = streams["lerobot"][0].first
    expected = {
        "action": (BATCH, TA, 7),
        "observation.images.front": (BATCH, TO, 3, args.size, args.size),
    }
    for key, shape in expected.items():
        if tuple(first[key].shape) != shape:
            raise RuntimeError(f"LeRobot batch {key}: shape {tuple(first[key].shape)} != {shape}")

    # Rounds interleave the readers so that load from other processes hits all of them alike;
    # medians over rounds are reported.
    laps: dict[str, list[tuple[float, float]]] = {name: [] for name in streams}
    for _ in range(args.rounds):
        for name, (stream, batches) in streams.items():
            laps[name].append(stream.time(batches))
    for name, runs in laps.items():
        wall, cpu = np.median([r[0] for r in runs]), np.median([r[1] for r in runs])
        result[name] = {
            "batches_per_s": round(1 / wall, 2),
            "samples_per_s": round(BATCH / wall),
            "wall_s_per_batch_rounds": [round(r[0], 4) for r in runs],
            "setup_s": round(setup[name], 2),
        }
        if args.num_workers == 0:  # with workers the main process only collates
            result[name]["cpu_s_per_batch"] = round(cpu, 4)
    for name in ("robotrl_cached", "robotrl_zarr"):
        ratio = result[name]["batches_per_s"] / result["lerobot"]["batches_per_s"]
        result[f"ratio_{name}_over_lerobot"] = round(ratio, 2)
        if args.num_workers == 0:
            cpu_ratio = result["lerobot"]["cpu_s_per_batch"] / result[name]["cpu_s_per_batch"]
            result[f"cpu_ratio_{name}_over_lerobot"] = round(cpu_ratio, 2)
    result["load_avg_1min"] = os.getloadavg()[0]
    print(json.dumps(result))
    if args.out is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

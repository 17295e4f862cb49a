"""Benchmark of robotrl.datasets; prints one JSON object.

Recording: two 128x128 cameras + state at a simulated 20 Hz (the loop sleeps to each tick's
deadline, as a teleop session would), then the same unthrottled. Reading: batches of 64 with
To=2, Ta=16 from the in-memory cache (with and without images) and straight from zarr.
Images are synthetic but sim-like (smooth shading, a moving object, mild noise) so they
compress like rendered frames rather than like random bytes. Integrity: the quick structural
check every open runs and the full content check (``robotrl dataset verify``), each as a ratio
of a training run's data start-up (open, statistics, decoding the images into the cache, first
batch; imports and the policy build not counted, so the ratio is an upper bound).

    python bench/datasets.py [--episodes 3] [--steps 100] [--out /tmp/bench_ds]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from robotrl.datasets import EpisodeStore, SequenceDataset, compute_stats, make_dataloader
from robotrl.datasets.integrity import content_damage, structure_damage

FPS = 20.0
SIZE = 128


def _frames(rng: np.random.Generator, steps: int) -> np.ndarray:
    """(steps, 2, H, W, 3) uint8 sim-like frames for two cameras."""
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    base = np.stack([xx * 0.8, yy * 0.6, (xx + yy) * 0.3], -1)
    out = np.empty((steps, 2, SIZE, SIZE, 3), np.uint8)
    for t in range(steps):
        for cam in range(2):
            img = base.copy()
            cx, cy = 30 + (t * 2 + 40 * cam) % 70, 50 + cam * 20
            img[(xx - cx) ** 2 + (yy - cy) ** 2 < 150] = (200, 40, 40)
            img += rng.normal(0, 2, img.shape)
            out[t, cam] = np.clip(img, 0, 255)
    return out


def _record(store: EpisodeStore, frames: np.ndarray, episodes: int, realtime: bool) -> dict:
    rng = np.random.default_rng(0)
    steps = len(frames)
    dt = 1.0 / FPS
    add_lat, commit_s, late = [], [], 0
    t_start = time.perf_counter()
    for _ in range(episodes):
        with store.begin_episode(operator="bench", task="lift", language="pick up") as w:
            next_tick = time.perf_counter()
            for t in range(steps):
                obs = {
                    "state/ee_pos": rng.standard_normal(3).astype(np.float32),
                    "state/joint_pos": rng.standard_normal(7).astype(np.float32),
                    "images/front": frames[t, 0],
                    "images/wrist": frames[t, 1],
                }
                t0 = time.perf_counter()
                w.add(obs, rng.uniform(-1, 1, 7).astype(np.float32), {"intervention": False})
                add_lat.append(time.perf_counter() - t0)
                if realtime:
                    next_tick += dt
                    slack = next_tick - time.perf_counter()
                    if slack < 0:
                        late += 1
                    else:
                        time.sleep(slack)
            t0 = time.perf_counter()
            w.commit(success=True)
            commit_s.append(time.perf_counter() - t0)
    wall = time.perf_counter() - t_start
    frames_total = episodes * steps
    return {
        "frames": frames_total,
        "achieved_fps": round(frames_total / wall, 1),
        "steps_per_s_excluding_commit": round(frames_total / (wall - sum(commit_s)), 1),
        "late_ticks": late,
        "add_ms_max": round(1e3 * max(add_lat), 3),
        "add_ms_mean": round(1e3 * float(np.mean(add_lat)), 3),
        "commit_s_max": round(max(commit_s), 3),
        "commit_s_mean": round(float(np.mean(commit_s)), 3),
    }


LIFT_STATE = {  # the lift env's state observation (key -> size)
    "state/joint_pos": 7,
    "state/joint_vel": 7,
    "state/ee_pos": 3,
    "state/ee_quat": 4,
    "state/ee_twist": 6,
    "state/wrench": 6,
    "state/gripper": 1,
    "state/cube_pos": 3,
    "state/cube_quat": 4,
}


def _commit_state_only(store: EpisodeStore, episodes: int, steps: int) -> dict:
    """Mean commit time of state-only episodes shaped like lift's (what a quickstart records)."""
    rng = np.random.default_rng(0)
    commit_s = []
    for _ in range(episodes):
        with store.begin_episode(operator="bench", task="lift", language="") as w:
            for _ in range(steps):
                obs = {k: rng.standard_normal(n).astype(np.float32) for k, n in LIFT_STATE.items()}
                w.add(obs, rng.uniform(-1, 1, 7).astype(np.float32), {"intervention": False})
            t0 = time.perf_counter()
            w.commit(success=True, final_obs=obs)
            commit_s.append(time.perf_counter() - t0)
    return {
        "episodes": episodes,
        "steps": steps,
        "commit_ms_mean": round(1e3 * float(np.mean(commit_s)), 1),
        "commit_ms_median": round(1e3 * float(np.median(commit_s)), 1),
    }


def _read(store: EpisodeStore, keys: list[str], cache: bool, batches: int) -> dict:
    t0 = time.perf_counter()
    ds = SequenceDataset(store, keys, 2, 16, cache_bytes=(8 << 30) if cache else 0)
    setup = time.perf_counter() - t0
    loader = make_dataloader(ds, 64, seed=0)
    next(iter(loader))
    t0 = time.perf_counter()
    done = 0
    while done < batches:  # as many epochs as it takes
        for _ in zip(range(batches - done), loader, strict=False):
            done += 1
    dt = time.perf_counter() - t0
    return {
        "batches_per_s": round(batches / dt, 1),
        "samples_per_s": round(64 * batches / dt, 1),
        "setup_s": round(setup, 3),
    }


def _integrity(path: Path, state: list[str], images: list[str]) -> dict:
    def timed(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        return best

    def startup() -> None:
        with EpisodeStore.open(path, check=False) as store:
            compute_stats(store, [*state, "action"])
            ds = SequenceDataset(store, images, 2, 16)
            next(iter(make_dataloader(ds, 64, seed=0)))

    with EpisodeStore.open(path, check=False) as store:
        structure = timed(lambda: structure_damage(store))
        content_state = timed(lambda: content_damage(store, [*state, "action"]), repeat=3)
        content_all = timed(lambda: content_damage(store), repeat=1)
    start = timed(startup, repeat=3)
    return {
        "training_data_startup_s": round(start, 4),
        "structure_check_s": round(structure, 5),
        "structure_check_over_startup": round(structure / start, 4),
        "content_check_state_s": round(content_state, 4),
        "content_check_all_s": round(content_all, 4),
        "content_check_all_over_startup": round(content_all / start, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100, help="steps per episode")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="bench_ds_"))
    shutil.rmtree(root, ignore_errors=True)
    frames = _frames(np.random.default_rng(1), args.steps)
    result: dict = {"image_size": [SIZE, SIZE], "cameras": 2, "fps_target": FPS}
    with EpisodeStore.create(root / "realtime", fps=FPS, robot="panda") as store:
        result["record_realtime_20hz"] = _record(store, frames, args.episodes, realtime=True)
    with EpisodeStore.create(root / "fast", fps=FPS, robot="panda") as store:
        result["record_unthrottled"] = _record(store, frames, 2 * args.episodes, realtime=False)
    with EpisodeStore.create(root / "state", fps=FPS, robot="panda") as st:
        result["commit_state_only_60_steps"] = _commit_state_only(st, 20, 60)
    disk = sum(f.stat().st_size for f in (root / "fast").rglob("*") if f.is_file())
    result["disk_bytes_per_step"] = round(disk / store.num_steps)
    store = EpisodeStore.open(root / "fast")
    state = ["state/ee_pos", "state/joint_pos"]
    images = [*state, "images/front", "images/wrist"]
    result["read_batch64_To2_Ta16"] = {
        "state_only_cached": _read(store, state, cache=True, batches=200),
        "with_images_cached": _read(store, images, cache=True, batches=50),
        "with_images_from_zarr": _read(store, images, cache=False, batches=3),
    }
    store.close()
    result["integrity"] = _integrity(root / "fast", state, images)
    print(json.dumps(result))
    if args.out is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

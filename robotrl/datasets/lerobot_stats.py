"""Per-feature statistics of a LeRobotDataset (``meta/stats.json``, ``stats/...`` columns).

The keys and shapes lerobot 0.4 writes: min, max, mean, std, count and quantiles q01 ... q99;
image statistics per channel, scaled to [0, 1], shape (3, 1, 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)  # lerobot's DEFAULT_QUANTILES -> q01 ... q99


class FeatureStats:
    """Accumulates lerobot's per-feature statistics over episodes.

    Numeric features keep every row (state/action/reward are small) so quantiles are exact;
    images keep a 256-bin histogram per channel, which makes their quantiles exact too.
    Image statistics are per channel, scaled to [0, 1], shape (3, 1, 1), as lerobot's.
    """

    def __init__(self, feature: dict[str, Any]) -> None:
        self.image = feature["dtype"] in ("image", "video")
        self.dtype = np.dtype("uint8" if self.image else feature["dtype"])
        self._rows: list[np.ndarray] = []
        self._hist = np.zeros((3, 256), np.int64)
        self.count = 0

    def add(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Add (L, ...) rows; returns the statistics of just these rows (episode stats)."""
        self.count += len(rows)
        if self.image:
            hist = np.stack([np.bincount(rows[..., c].ravel(), minlength=256) for c in range(3)])
            self._hist += hist
            return _hist_stats(hist, len(rows))
        self._rows.append(rows)
        return _row_stats(rows, self.dtype)

    def result(self) -> dict[str, np.ndarray]:
        """Statistics of everything added."""
        if self.image:
            return _hist_stats(self._hist, self.count)
        return _row_stats(np.concatenate(self._rows), self.dtype)


def _row_stats(rows: np.ndarray, dtype: np.dtype) -> dict[str, np.ndarray]:
    x = rows.reshape(len(rows), -1).astype(np.float64)
    lo, hi = rows.min(0).reshape(-1), rows.max(0).reshape(-1)
    if dtype.kind in "iub":
        lo, hi = lo.astype(dtype), hi.astype(dtype)
    out = {"min": lo, "max": hi, "mean": x.mean(0), "std": x.std(0)}
    out["count"] = np.array([len(rows)])
    for q in QUANTILES:
        out[f"q{round(q * 100):02d}"] = np.quantile(x, q, axis=0)
    return out


def _hist_stats(hist: np.ndarray, frames: int) -> dict[str, np.ndarray]:
    """Per-channel stats from (3, 256) pixel histograms, in [0, 1], shape (3, 1, 1)."""
    levels = np.arange(256) / 255.0
    n = hist.sum(1)
    cdf = np.cumsum(hist, 1)
    mean = hist @ levels / n
    std = np.sqrt(np.maximum(hist @ levels**2 / n - mean**2, 0.0))
    out = {
        "min": levels[np.argmax(hist > 0, 1)],
        "max": levels[255 - np.argmax(hist[:, ::-1] > 0, 1)],
        "mean": mean,
        "std": std,
    }
    for q in QUANTILES:
        out[f"q{round(q * 100):02d}"] = levels[np.argmax(cdf >= q * n[:, None], 1)]
    out = {k: v.reshape(3, 1, 1) for k, v in out.items()}
    out["count"] = np.array([frames])
    return out


def stats_to_json(stats: dict[str, np.ndarray]) -> dict[str, Any]:
    return {k: np.asarray(v).tolist() for k, v in stats.items()}

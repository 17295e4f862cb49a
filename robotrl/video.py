"""Write rollout frames to MP4 (H.264 via the ffmpeg binary that imageio-ffmpeg ships)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import imageio.v2 as imageio
import numpy as np


def write_mp4(frames: Sequence[np.ndarray], path: str | Path, fps: float = 20.0) -> Path:
    """Encode (H, W, 3) uint8 frames; H and W are padded to even sizes for yuv420p."""
    if len(frames) == 0:
        raise ValueError("no frames to write")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = frames[0].shape[:2]
    pad = ((0, h % 2), (0, w % 2), (0, 0))
    out = imageio.get_writer(path, fps=fps, codec="libx264", quality=7, macro_block_size=1)
    with out:  # (not 'as': imageio's stubs type __enter__ as the base without append_data)
        for frame in frames:
            out.append_data(np.pad(np.asarray(frame, dtype=np.uint8), pad, mode="edge"))
    return path

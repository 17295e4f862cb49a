import imageio.v2 as imageio
import numpy as np
import pytest

from robotrl.video import write_mp4


def test_mp4_round_trip_odd_size(tmp_path):
    frames = [np.full((31, 45, 3), 10 * i, dtype=np.uint8) for i in range(12)]
    path = write_mp4(frames, tmp_path / "v" / "a.mp4", fps=10)
    reader = imageio.get_reader(path)
    decoded = [f for f in reader]
    assert len(decoded) == 12
    assert decoded[0].shape == (32, 46, 3)
    assert abs(int(decoded[5].mean()) - 50) <= 3


def test_mp4_needs_frames(tmp_path):
    with pytest.raises(ValueError, match="no frames"):
        write_mp4([], tmp_path / "a.mp4")

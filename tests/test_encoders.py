import pytest
import torch

from policies.encoders import ObsEncoder, random_shift
from policies.normalizer import Normalizer


def test_random_shift_moves_images_by_whole_pixels_with_edge_padding():
    img = torch.zeros(64, 1, 9, 9)
    img[:, :, 4, 4] = 1.0
    out = random_shift(img, 2, torch.Generator().manual_seed(0))
    assert out.shape == img.shape and torch.all(out.sum((1, 2, 3)) == 1.0)  # one pixel, moved
    pos = out[:, 0].flatten(1).argmax(1)
    rows, cols = pos // 9, pos % 9
    assert rows.min() >= 2 and rows.max() <= 6 and cols.min() >= 2 and cols.max() <= 6
    assert len(set(pos.tolist())) > 5  # different shifts per image
    assert torch.equal(random_shift(img, 0), img)


def test_obs_encoder_state_and_images_and_shape_errors():
    enc = ObsEncoder(
        {"state/x": 3}, ["images/front"], obs_horizon=2, out_dim=16, image_feature_dim=8
    )
    norm = Normalizer.for_policy({"state/x": 3}, 1)
    obs = {
        "state/x": torch.randn(5, 2, 3),
        "images/front": torch.randint(0, 255, (5, 2, 32, 32, 3), dtype=torch.uint8),
    }
    assert enc(obs, norm).shape == (5, 16)
    enc.eval()
    assert torch.equal(enc(obs, norm), enc(obs, norm))  # no augmentation in eval mode
    with pytest.raises(ValueError, match="To=2"):
        enc({**obs, "state/x": torch.randn(5, 3, 3)}, norm)
    with pytest.raises(ValueError, match=r"\(B, To=2, H, W, 3\)"):
        enc({**obs, "images/front": torch.zeros(5, 2, 3, 32, 32, dtype=torch.uint8)}, norm)
    with pytest.raises(ValueError, match="at least one"):
        ObsEncoder({}, [])

import numpy as np
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


def test_spatial_softmax_returns_the_position_of_a_bright_spot():
    from policies.encoders import SpatialSoftmax

    pool = SpatialSoftmax(channels=1, keypoints=1)
    with torch.no_grad():
        pool.proj.weight.fill_(1.0)
        pool.proj.bias.zero_()
        pool.log_temperature.fill_(float(np.log(0.01)))
    feat = torch.zeros(2, 1, 16, 16)
    feat[0, 0, 3, 12] = 1.0
    feat[1, 0, 10, 1] = 1.0
    grid = np.linspace(-1.0, 1.0, 16)
    xy = pool(feat).detach().numpy()
    np.testing.assert_allclose(xy[0], [grid[12], grid[3]], atol=1e-3)
    np.testing.assert_allclose(xy[1], [grid[1], grid[10]], atol=1e-3)


def test_image_encoder_keeps_position_information():
    """Images that differ only in where a square is get different features (GAP would not)."""
    from policies.encoders import ImageEncoder

    torch.manual_seed(0)
    enc = ImageEncoder(out_dim=16)
    img = torch.zeros(2, 3, 64, 64)
    img[0, :, 8:16, 8:16] = 1.0
    img[1, :, 40:48, 40:48] = 1.0
    with torch.no_grad():
        feat = enc(img)
    assert feat.shape == (2, 16)
    assert (feat[0] - feat[1]).abs().max() > 1e-3
    with pytest.raises(ValueError, match="strides"):
        ImageEncoder(channels=(8, 8), strides=(2,))

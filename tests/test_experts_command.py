import imageio.v2 as imageio
import pytest
from omegaconf import OmegaConf

from robotrl.cli import compose
from robotrl.commands.experts import run_experts


@pytest.mark.slow
def test_experts_evaluates_experts_and_writes_videos(tmp_path):
    cfg = compose(
        "experts",
        [
            "tasks=[reach,lift]",
            "episodes=3",
            "videos=1",
            "image_size=[48,64]",
            f"output_dir={tmp_path}",
            "progress=false",
        ],
    )
    summary = run_experts(cfg)
    assert set(summary["tasks"]) == {"reach", "lift"}
    for task, res in summary["tasks"].items():
        assert res["success_rate"] == 1.0, task
        lo, hi = res["success_ci95"]
        assert 0.0 < lo < hi == 1.0
        frames = [f for f in imageio.get_reader(res["videos"][0])]
        assert len(frames) >= 10 and frames[0].shape == (48, 64, 3)
    saved = OmegaConf.load(f"{summary['run_dir']}/config.yaml")
    assert saved.episodes == 3

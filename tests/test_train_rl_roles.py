"""robotrl.commands.train_rl_roles: the config-to-overrides round trip the split role relies
on (the processes themselves, and how they stop: test_train_rl_command)."""

from omegaconf import OmegaConf

from robotrl.cli import compose
from robotrl.commands.train_rl_roles import overrides


def test_overrides_recompose_the_same_config():
    cfg = compose("train_rl", ["checkpoint=/tmp/ckpt", "residual.scale=0.3", "task=peg_insert"])
    cfg.name = "a name with spaces"
    again = compose("train_rl", overrides(cfg))
    assert OmegaConf.to_container(again, resolve=True) == OmegaConf.to_container(cfg, resolve=True)
    assert "residual.scale=0.3" in overrides(cfg) and 'name="a name with spaces"' in overrides(cfg)

"""robotrl.commands.train_rl_roles: the config-to-overrides round trip the split role relies
on, and the signal handling of the learner / actor roles (the processes themselves:
test_train_rl_command)."""

import os
import signal

from omegaconf import OmegaConf

from robotrl.cli import compose
from robotrl.commands.train_rl_roles import overrides, stop_on_signals


def test_overrides_recompose_the_same_config():
    cfg = compose("train_rl", ["checkpoint=/tmp/ckpt", "residual.scale=0.3", "task=peg_insert"])
    cfg.name = "a name with spaces"
    again = compose("train_rl", overrides(cfg))
    assert OmegaConf.to_container(again, resolve=True) == OmegaConf.to_container(cfg, resolve=True)
    assert "residual.scale=0.3" in overrides(cfg) and 'name="a name with spaces"' in overrides(cfg)


def test_stop_on_signals_sets_the_event_and_restores_the_handlers():
    before = signal.getsignal(signal.SIGTERM)
    stop, restore = stop_on_signals()
    assert not stop.is_set()
    os.kill(os.getpid(), signal.SIGTERM)
    assert stop.wait(1.0)
    restore()
    assert signal.getsignal(signal.SIGTERM) is before

"""The command registry's defaults: every YAML restates the current defaults of the dataclasses
its command builds, every registered dataclass shares keys with its YAML section, two dataclasses
that give one key different defaults are refused, and restating rewrites a stale YAML of a
source checkout only."""

from dataclasses import dataclass
from importlib import resources

import pytest

import robotrl.commands as commands


@pytest.mark.parametrize("config", sorted(commands.CONFIG_DATACLASSES))
def test_every_yaml_restates_its_dataclasses_current_defaults(config):
    text = resources.files("robotrl.conf").joinpath(f"{config}.yaml").read_text()
    assert commands.restated_config(config) == text, (
        f"robotrl/conf/{config}.yaml restates an old default: "
        "run python -m robotrl.commands --defaults docs/configuration.md"
    )


@pytest.mark.parametrize(
    ("config", "section", "target"),
    [(c, s, t) for c, entries in commands.CONFIG_DATACLASSES.items() for s, t in entries],
)
def test_every_registered_dataclass_shares_keys_with_its_section(config, section, target):
    assert commands.section_defaults(config, section, target), (
        f"{config}.yaml has no key of {target} under {section or 'the top level'}"
    )


@dataclass
class _One:
    seed: int = 0


@dataclass
class _Other:
    seed: float = 0.0


def test_two_dataclasses_that_disagree_on_a_key_are_refused(monkeypatch):
    monkeypatch.setitem(
        commands.CONFIG_DATACLASSES,
        "train_rl",
        (("", f"{__name__}:_One"), ("", f"{__name__}:_Other")),
    )
    with pytest.raises(ValueError, match=r"train_rl\.seed: _One gives 0, _Other 0\.0"):
        commands.dataclass_defaults("train_rl")


@dataclass
class _Patient:
    patience: int = 7


def _checkout(root, monkeypatch, pyproject=True):
    """A copy of train_reward.yaml at <root>/robotrl/conf/, registered with _Patient."""
    conf = root / "robotrl" / "conf"
    conf.mkdir(parents=True)
    path = conf / "train_reward.yaml"
    path.write_text(resources.files("robotrl.conf").joinpath("train_reward.yaml").read_text())
    if pyproject:
        (root / "pyproject.toml").write_text("")
    monkeypatch.setattr(
        commands, "CONFIG_DATACLASSES", {"train_reward": (("", f"{__name__}:_Patient"),)}
    )
    monkeypatch.setattr(commands, "_conf_file", lambda config: path)
    return path


def test_restating_rewrites_a_stale_yaml_and_then_nothing(tmp_path, monkeypatch):
    path = _checkout(tmp_path, monkeypatch)
    assert commands.write_restated_configs() == [path]
    assert "patience: 7 " in path.read_text()
    assert commands.write_restated_configs() == []


def test_restating_refuses_an_installed_package(tmp_path, monkeypatch):
    path = _checkout(tmp_path, monkeypatch, pyproject=False)
    before = path.read_text()
    with pytest.raises(RuntimeError, match="not in a source checkout"):
        commands.write_restated_configs()
    assert path.read_text() == before

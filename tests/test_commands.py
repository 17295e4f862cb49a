"""The command registry's defaults: every YAML restates the current defaults of the dataclasses
its command builds, a section of the registry names keys the YAML has, and two dataclasses
that give one key different defaults are refused."""

from dataclasses import dataclass

import pytest

import robotrl.commands as commands


@pytest.mark.parametrize("config", sorted(commands.CONFIG_DATACLASSES))
def test_every_yaml_restates_its_dataclasses_current_defaults(config):
    from importlib import resources

    text = resources.files("robotrl.conf").joinpath(f"{config}.yaml").read_text()
    assert commands.restated_config(config) == text, (
        f"robotrl/conf/{config}.yaml restates an old default: "
        "run python -m robotrl.commands docs/configuration.md"
    )


@pytest.mark.parametrize("config", sorted(commands.CONFIG_DATACLASSES))
def test_every_registered_section_shares_keys_with_its_dataclass(config):
    defaults = commands.dataclass_defaults(config)
    for section, target in commands.CONFIG_DATACLASSES[config]:
        prefix = f"{section}." if section else ""
        under = [k for k in defaults if k.startswith(prefix) and (section or "." not in k)]
        assert under, f"{config}.yaml has no key of {target} under {section or 'the top level'}"
    assert defaults["residual.scale"] == 0.1 if config == "train_rl" else True


@dataclass
class _One:
    seed: int = 0


@dataclass
class _Other:
    seed: int = 1


def test_two_dataclasses_that_disagree_on_a_key_are_refused(monkeypatch):
    monkeypatch.setitem(
        commands.CONFIG_DATACLASSES,
        "train_rl",
        (("", f"{__name__}:_One"), ("", f"{__name__}:_Other")),
    )
    with pytest.raises(ValueError, match=r"train_rl\.seed: _One gives 0, _Other 1"):
        commands.dataclass_defaults("train_rl")

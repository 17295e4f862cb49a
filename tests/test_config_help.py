"""The configuration reference page: generated from the YAML configs, kept current, valid
markdown tables."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from robotrl.config_help import reference_markdown

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_reference_page_is_the_generated_one(tmp_path):
    out = tmp_path / "configuration.md"
    subprocess.run([sys.executable, "-m", "robotrl.commands", str(out)], check=True, cwd=ROOT)
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert out.read_text() == committed, (
        "docs/configuration.md is stale: run python -m robotrl.commands docs/configuration.md"
    )


def test_every_key_is_one_table_row_with_escaped_text():
    text = reference_markdown([("train-rl", "train_rl", "RL on a BC checkpoint")])
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    keys = [row.split("`")[1] for row in rows]
    assert "residual.scale" in keys and "eval_envs" in keys and "flow_pg.clip" in keys
    assert len(keys) == len(set(keys))
    for row in rows:  # 3 cells: a '|' inside a meaning is escaped
        assert row.replace("\\|", "").count("|") == 4, row
    human = next(r for r in rows if r.startswith("| `human`"))
    assert "none \\| scripted" in human
    name = next(r for r in rows if r.startswith("| `name`"))
    assert "&lt;output_dir&gt;" in name  # not an HTML tag for the site


@pytest.mark.parametrize(
    ("config", "required", "cls"),
    [
        ("train_rl", ["checkpoint=x"], "robotrl.algos.residual_training:TrainConfig"),
        ("train_rl", ["checkpoint=x"], "robotrl.algos.dsrl_training:DSRLTrainConfig"),
        ("train_rl", ["checkpoint=x"], "robotrl.algos.flow_pg_training:FlowTrainConfig"),
        ("train_bc", ["dataset=x"], "robotrl.bc_training:BCConfig"),
        ("distill", ["checkpoint=x"], "policies.distillation:DistillConfig"),
        ("train_reward", ["dataset=x"], "robotrl.algos.reward_training:RewardTrainConfig"),
    ],
)
def test_command_defaults_equal_the_dataclass_defaults(config, required, cls) -> None:
    # a top-level key that names a field of the dataclass the command builds has its default
    # (train_rl's sections: test_train_rl_command)
    import dataclasses
    import importlib

    from robotrl.config_help import compose

    module, name = cls.split(":")
    fields = {f.name: f for f in dataclasses.fields(getattr(importlib.import_module(module), name))}
    cfg = compose(config, required)
    shared = [k for k in cfg if k in fields]
    assert shared, f"{config}.yaml shares no key with {name}"
    for key in shared:
        f = fields[key]
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
        value = cfg[key]
        value = list(value) if hasattr(value, "__len__") and not isinstance(value, str) else value
        default = list(default) if isinstance(default, tuple) else default
        assert value == default, f"{config}.{key}: yaml {value!r}, {name} {default!r}"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("total_steps=abc", "total_steps=abc: expected an integer (default 20000)"),
        ("residual.utd=1.5", "residual.utd=1.5: expected an integer"),
        ("progress=maybe", "progress=maybe: expected true or false"),
        ("residual.actor_lr=fast", "residual.actor_lr=fast: expected a number"),
    ],
)
def test_an_override_of_the_wrong_type_is_refused(override, message) -> None:
    from robotrl.config_help import ConfigKeyError, compose

    with pytest.raises(ConfigKeyError, match=re.escape(message)):
        compose("train_rl", ["checkpoint=x", override])


def test_overrides_of_the_right_type_pass() -> None:
    from robotrl.config_help import compose

    cfg = compose(
        "train_rl",
        ["checkpoint=x", "residual.actor_lr=1", "target_success=null", "obs_keys=[state/ee_pos]"],
    )
    assert cfg.residual.actor_lr == 1 and cfg.target_success is None


def test_keys_that_say_so_take_one_value_per_element() -> None:
    from robotrl.config_help import ConfigKeyError, compose

    cfg = compose("collect", ["expert_bias=[0,0.4,0,0,0,0,0]"])
    assert list(cfg.expert_bias) == [0, 0.4, 0, 0, 0, 0, 0]
    assert compose("collect", ["expert_bias=0.3"]).expert_bias == 0.3
    with pytest.raises(ConfigKeyError, match=re.escape("expected a number or a list of them")):
        compose("collect", ["expert_bias=[0,x]"])
    with pytest.raises(ConfigKeyError, match="expected a number \\(default"):  # others: one
        compose("train_rl", ["checkpoint=x", "warmup_noise=[0.1]"])


@pytest.mark.parametrize(
    "cls",
    [
        "policies.flow_matching:FlowMatchingPolicy",
        "policies.diffusion:DiffusionPolicy",
        "policies.vla:TinyVLA",
    ],
)
def test_train_bc_policy_keys_equal_the_constructor_defaults(cls) -> None:
    # a policy's typed constructor signature is its config: train_bc.yaml restates the defaults
    # it passes (diffusion calls num_steps num_inference_steps); the vla's mlp expert takes
    # hidden/depth too
    import importlib
    import inspect

    from robotrl.config_help import compose

    module, name = cls.split(":")
    params = inspect.signature(getattr(importlib.import_module(module), name).__init__).parameters
    cfg = compose("train_bc", ["dataset=x"])
    alias = {"num_steps": "num_inference_steps"} if name == "DiffusionPolicy" else {}
    checked = 0
    for key in ("obs_horizon", "action_horizon", "num_steps", "hidden", "depth"):
        param = params.get(alias.get(key, key))
        if param is None or param.default is inspect.Parameter.empty:
            continue
        assert cfg[key] == param.default, (
            f"train_bc.{key}: yaml {cfg[key]!r}, {name} {param.default!r}"
        )
        checked += 1
    assert checked >= 3, f"{name} shares too few keys with train_bc.yaml"

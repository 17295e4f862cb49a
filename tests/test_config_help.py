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
        "docs/configuration.md is stale: "
        "run python -m robotrl.commands --defaults docs/configuration.md"
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


YAML = """\
# header
lr: 1.0e-4      # a rate
steps: 10       # env steps
nested:         # a section
  scale: 0.1    # a bound
  dims: null    # which
"""


def test_restating_a_changed_default_keeps_the_comment_and_its_column():
    from robotrl.config_help import restate_defaults

    out = restate_defaults(YAML, {"steps": 2000, "nested.scale": 0.5, "nested.dims": (0, 1)})
    assert "steps: 2000     # env steps\n" in out
    assert "  scale: 0.5    # a bound\n" in out
    assert "  dims: [0, 1]  # which\n" in out
    assert out.splitlines()[1] == "lr: 1.0e-4      # a rate"  # untouched
    assert restate_defaults(YAML, {"lr": 1e-4, "steps": 10}) == YAML  # equal values stay as written


def test_restating_fixes_a_value_of_the_wrong_type():
    from robotrl.config_help import restate_defaults

    assert "steps: 10.0" in restate_defaults(YAML, {"steps": 10.0})
    out = restate_defaults(YAML, {"nested.dims": "on", "lr": 1e-5})
    assert '  dims: "on"' in out and "lr: 1e-05" in out


@pytest.mark.parametrize(
    ("text", "defaults", "message"),
    [
        (YAML, {"nested.missing": 1}, r"not keys of the YAML: \['nested\.missing'\]"),
        (YAML, {"nested": 1}, "nested is a mapping or block value"),
        ("a: ${b}\nb: 3\n", {"a": 3}, r"a is written '\$\{b\}'"),
        ("a: ???\n", {"a": 3}, r"a is written '\?\?\?'"),
        ("a: |\n  text\n", {"a": "x"}, "a is written '|'"),
    ],
)
def test_restating_what_is_not_a_one_line_value_is_refused(text, defaults, message):
    from robotrl.config_help import restate_defaults

    with pytest.raises(KeyError, match=message):
        restate_defaults(text, defaults)


@pytest.mark.parametrize("value", [{"a": 1}, complex(1, 2), b"x"])
def test_a_default_without_a_yaml_form_is_refused(value):
    from robotrl.config_help import restate_defaults

    with pytest.raises(TypeError, match="no one-line YAML form"):
        restate_defaults("a: 1\n", {"a": value})


def test_same_value_compares_types_all_the_way_down():
    from robotrl.config_help import same_value

    assert same_value([0, 1], (0, 1)) and same_value(float("nan"), float("nan"))
    assert not same_value(1, 1.0) and not same_value(1, True) and not same_value([0, 1], [0.0, 1])


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

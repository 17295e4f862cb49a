"""The bench scripts' key=value arguments: defaults kept, given keys replaced, unknown keys and a
missing required value exit with a message."""

import pytest

from robotrl.benchmarks.arguments import key_values


def test_given_keys_replace_the_defaults():
    args = key_values(["seed=7", "checkpoint=ck"], {"checkpoint": "", "seed": "0"}, "usage")
    assert args == {"checkpoint": "ck", "seed": "7"}


def test_an_unknown_key_exits_naming_the_known_ones():
    with pytest.raises(SystemExit, match=r"unknown argument 'sed'; expected one of \['seed'\]"):
        key_values(["sed=1"], {"seed": "0"}, "usage")


def test_a_missing_required_value_exits_with_the_usage():
    with pytest.raises(SystemExit, match="Usage: bench"):
        key_values([], {"checkpoint": ""}, "Usage: bench", required="checkpoint")

import json

import numpy as np
from omegaconf import OmegaConf

from robotrl.run import emit_summary, make_run_dir, save_config


def test_run_dir_layout_and_no_clash(tmp_path):
    a = make_run_dir(tmp_path, "x")
    b = make_run_dir(tmp_path, "x")
    assert a != b and a.is_dir() and b.is_dir()
    assert a.parent.parent == tmp_path and a.name.endswith("-x")


def test_save_config_resolves_interpolations(tmp_path):
    cfg = OmegaConf.create({"a": 2, "b": "${a}"})
    path = save_config(cfg, tmp_path)
    assert OmegaConf.load(path).b == 2


def test_summary_is_one_json_line(capsys):
    emit_summary({"rate": np.float32(0.5), "arr": np.arange(2), "nested": {"t": (1, 2)}})
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert json.loads(out) == {"rate": 0.5, "arr": [0, 1], "nested": {"t": [1, 2]}}

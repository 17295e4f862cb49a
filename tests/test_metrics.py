from types import SimpleNamespace

from robotrl.metrics import MetricsLogger, learner_summary, read_csv


def test_rows_with_new_columns_rewrite_the_header(tmp_path):
    log = MetricsLogger(tmp_path / "m.csv")
    log.log(step=1, loss=0.5)
    log.log(step=2, loss=0.4)
    log.log(step=2, success_rate=0.25)
    rows = read_csv(tmp_path / "m.csv")
    assert rows == [
        {"step": 1, "loss": 0.5},
        {"step": 2, "loss": 0.4},
        {"step": 2, "success_rate": 0.25},
    ]
    assert log.series("step", "loss") == ([1.0, 2.0], [0.5, 0.4])


def test_plot_writes_a_png(tmp_path):
    log = MetricsLogger(tmp_path / "m.csv")
    for i in range(5):
        log.log(step=i, loss=1.0 / (i + 1))
    out = log.plot(tmp_path / "p.png", "step", [["loss"], ["success_rate"]], log_y={0: True})
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_log_episodes_writes_running_means_and_a_plot(tmp_path, monkeypatch):
    from robotrl.metrics import log_episodes, read_csv

    figures = []
    draw = MetricsLogger.figure
    monkeypatch.setattr(
        MetricsLogger,
        "figure",
        lambda self, *a, **k: figures.append(draw(self, *a, **k)) or figures[-1],
    )
    eps = [
        {
            "env_steps": 100 * (i + 1),
            "success": float(i >= 5),
            "length": 100,
            "intervention_rate": r,
        }
        for i, r in enumerate([0.5, 0.5, 0.4, 0.4, 0.3, 0.2, 0.1, 0.0, 0.0, 0.0])
    ]
    png = log_episodes(eps, tmp_path, window=2)
    assert png is not None and png.is_file() and png.stat().st_size > 1000
    success_ax = figures[0].axes[0]
    assert "success" in success_ax.get_title() and success_ax.get_ylim() == (-0.02, 1.02)
    rows = read_csv(tmp_path / "episodes.csv")
    assert len(rows) == 10
    assert rows[0]["intervention_rate_avg"] == 0.5
    assert abs(rows[5]["intervention_rate_avg"] - 0.25) < 1e-9  # mean of 0.3, 0.2
    assert rows[5]["success_avg"] == 0.5 and rows[9]["success_avg"] == 1.0
    assert log_episodes([], tmp_path / "none") is None


def test_panels_without_data_are_left_out_and_success_spans_0_to_1(tmp_path):
    from robotrl.metrics import kept_panels

    log = MetricsLogger(tmp_path / "m.csv")
    for i in range(5):
        log.log(step=i, loss=1.0 / (i + 1))
    log.log(step=4, success_rate=0.95)
    panels = [["loss"], ["success_rate"], ["approx_kl", "clip_frac"]]  # no ratio was logged
    assert kept_panels(log, "step", panels) == [0, 1]
    fig = log.figure("step", panels, titles=["loss", "success", "PPO ratio"], log_y={0: True})
    assert [ax.get_title() for ax in fig.axes] == ["loss", "success"]
    assert fig.get_size_inches()[0] == 10  # 5 per kept panel
    assert fig.axes[0].get_yscale() == "log"
    assert fig.axes[1].get_ylim() == (-0.02, 1.02)  # not auto-scaled around 0.95


def test_a_plot_without_any_data_says_so(tmp_path):
    log = MetricsLogger(tmp_path / "m.csv")
    log.log(step=0, loss=float("nan"))
    fig = log.figure("step", [["loss"], ["success_rate"]])
    assert len(fig.axes) == 1 and fig.axes[0].texts[0].get_text() == "no data yet"
    out = log.plot(tmp_path / "p.png", "step", [["success_rate"]])
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_final_evaluation_names_the_last_one_and_flags_the_base():
    from robotrl.metrics import final_evaluation

    evals = [{"env_steps": 0, "success_rate": 0.2}, {"env_steps": 600, "success_rate": 0.7}]
    assert final_evaluation(evals, "env_steps") == {
        "final_success": 0.7,
        "final_eval_step": 600,
        "final_is_base": False,
    }
    base_only = final_evaluation(evals[:1], "env_steps")
    assert base_only == {"final_success": 0.2, "final_eval_step": 0, "final_is_base": True}
    no_sim = final_evaluation([{"step": 40, "val_loss": 0.1}], "step")
    assert no_sim["final_success"] is None and no_sim["final_eval_step"] is None


def test_worse_than_base_says_so_on_stderr(capsys):
    from robotrl.metrics import worse_than_base

    base = {"env_steps": 0, "success_rate": 0.3}
    assert worse_than_base([base, {"env_steps": 2000, "success_rate": 0.05}], "robotrl x")
    err = capsys.readouterr().err
    assert err.startswith("robotrl x: the trained policy succeeded less often than the base")
    assert "(0.05 vs 0.30)" in err and err.count("\n") == 1
    assert not worse_than_base([base, {"env_steps": 2000, "success_rate": 0.3}])
    assert not worse_than_base([base])  # nothing trained
    assert capsys.readouterr().err == ""


def test_a_learners_summary_reads_its_base_last_and_best_evaluations(capsys):
    evals = [
        {"env_steps": 0, "success_rate": 0.5},
        {"env_steps": 100, "success_rate": 0.75},
        {"env_steps": 200, "success_rate": 0.25},
    ]
    run = SimpleNamespace(
        evaluations=evals, env_steps=200, wall_s=1.23, steps_to_target=None, kept_step=100
    )
    out = learner_summary(run)
    assert out == {
        "base_success": 0.5, "final_success": 0.25, "final_eval_step": 200,
        "final_is_base": False, "worse_than_base": True, "best_success": 0.75,
        "kept_step": 100, "env_steps": 200, "steps_to_target": None, "wall_s": 1.2,
    }  # fmt: skip
    assert "succeeded less often than the base" in capsys.readouterr().err


def test_episodes_summary_counts_the_last_20_and_writes_the_log(tmp_path):
    from robotrl.metrics import episodes_summary

    eps = [{"env_steps": 10 * i, "success": float(i >= 15), "length": 10} for i in range(30)]
    out = episodes_summary(eps, tmp_path)
    assert out["episodes"] == 30
    assert out["train_success_last_20"] == 0.75  # episodes 10-29: 15-29 succeed
    assert out["episodes_plot"] is not None and (tmp_path / "episodes.csv").is_file()
    none = episodes_summary([], tmp_path / "none")
    assert none == {"episodes": 0, "train_success_last_20": 0.0, "episodes_plot": None}

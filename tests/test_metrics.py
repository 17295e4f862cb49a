from robotrl.metrics import MetricsLogger, read_csv


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


def test_log_episodes_writes_running_means_and_a_plot(tmp_path):
    from robotrl.metrics import log_episodes, read_csv

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
    rows = read_csv(tmp_path / "episodes.csv")
    assert len(rows) == 10
    assert rows[0]["intervention_rate_avg"] == 0.5
    assert abs(rows[5]["intervention_rate_avg"] - 0.25) < 1e-9  # mean of 0.3, 0.2
    assert rows[5]["success_avg"] == 0.5 and rows[9]["success_avg"] == 1.0
    assert log_episodes([], tmp_path / "none") is None

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

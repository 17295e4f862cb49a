from robotrl.algos.agent_run import AgentRun
from robotrl.metrics import learner_summary


def test_a_run_starts_empty_with_its_own_lists_and_tally():
    a, b = AgentRun(agent="a"), AgentRun(agent="b")
    a.evaluations.append({"env_steps": 0, "success_rate": 0.5})
    a.safety.add({"safety": {"cost": 1.0}})
    assert b.evaluations == [] and b.safety.counts["steps"] == 0
    assert a.safety.counts["violation_steps"] == 1
    assert (a.env_steps, a.kept_step, a.steps_to_target, a.interrupted) == (0, 0, None, False)


def test_a_run_is_what_learner_summary_reads():
    run = AgentRun(
        agent=None,
        evaluations=[
            {"env_steps": 0, "success_rate": 0.4},
            {"env_steps": 100, "success_rate": 0.7},
        ],
        env_steps=100,
        wall_s=2.04,
        kept_step=100,
    )
    out = learner_summary(run)
    assert out["base_success"] == 0.4 and out["best_success"] == 0.7
    assert (out["kept_step"], out["env_steps"], out["wall_s"]) == (100, 100, 2.0)


def test_record_evaluation_logs_keeps_and_marks_the_first_row_at_the_target(tmp_path):
    from torch import nn

    from robotrl.algos.agent_run import finish_run, record_evaluation
    from robotrl.algos.kept_agent import KeptAgent
    from robotrl.metrics import MetricsLogger, read_csv

    net = nn.Linear(1, 1, bias=False)
    run, kept = AgentRun(agent=net), KeptAgent(net)
    logger = MetricsLogger(tmp_path / "m.csv")
    reached = []
    for step, rate, w in [(0, 0.4, 0.0), (100, 0.9, 1.0), (200, 0.95, 2.0), (300, 0.5, 3.0)]:
        nn.init.constant_(net.weight, w)
        row = {"env_steps": float(step), "success_rate": rate}
        reached.append(record_evaluation(run, row, kept, logger, target_success=0.9))
    assert reached == [False, True, False, False]
    assert run.steps_to_target == 100
    assert [r["success_rate"] for r in read_csv(tmp_path / "m.csv")] == [0.4, 0.9, 0.95, 0.5]
    finish_run(run, kept, env_steps=300, start=0.0)
    assert run.kept_step == 200 and run.env_steps == 300 and run.wall_s > 0
    assert net.weight.item() == 2.0  # the best evaluation's weights are back

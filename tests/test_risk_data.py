"""Risk data and pre-training: scripted behaviour labelled by the guard's costs, exported."""

from controllers.reflex import RiskMLP
from robotrl.algos.risk_data import pretrain_critic
from robotrl.algos.safety_critic import SafetyCriticConfig


def test_pretrain_on_scripted_behaviour_exports_a_runtime_critic(tmp_path) -> None:

    critic, buf, st = pretrain_critic(
        "peg_insert",
        tmp_path / "c.npz",
        episodes={"expert": 1, "adversarial": 2},
        updates=20,
        policies=("expert", "adversarial"),
        task_keys=("hole_pos",),
        progress=False,
    )
    # the expert is safe; ramming the block violates and ends each risk episode
    assert st["data"]["expert"]["violating_episodes"] == 0
    assert st["data"]["adversarial"]["violating_episodes"] == 2
    assert len(buf) == sum(d["transitions"] for d in st["data"].values())
    assert buf.reward[: len(buf)].sum() == 2 and critic.updates == 20
    mlp = RiskMLP.from_file(st["critic"])
    assert mlp.feature_names[-1] == "task/hole_pos" and mlp.obs_dim == 13


def test_pretrain_with_a_tighter_force_limit_labels_earlier_and_exports_eps_soft(tmp_path) -> None:

    stats = {}
    for limit in (1e6, 5.0):  # 1e6 N: never reached
        _, _, st = pretrain_critic(
            "peg_insert",
            tmp_path / f"c{limit}.npz",
            episodes=1,
            updates=5,
            policies=("adversarial",),
            cfg=SafetyCriticConfig(threshold=0.2, soft_threshold=0.05),
            force_limit=limit,
            progress=False,
        )
        stats[limit] = st
    # ramming the block: labelled as a violation at 5 N (ending the risk episode), never at 1e6 N
    never, tight = stats[1e6]["data"]["adversarial"], stats[5.0]["data"]["adversarial"]
    assert never["violating_episodes"] == 0 and tight["violating_episodes"] == 1
    assert tight["transitions"] < never["transitions"]
    mlp = RiskMLP.from_file(stats[5.0]["critic"])
    assert mlp.threshold == 0.2 and mlp.soft_threshold == 0.05

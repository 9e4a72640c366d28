"""benchmarks/learner_controls: variants (the CrossQ arm), time to skill on a learning curve, the
final checkpoints and the budget shares paired with the reference variant, the mechanism probe, the
collapse columns and their paired rate; one CrossQ learner built and trained a few steps."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch as th
from helpers.sac_icm_toy import ToyTradingEnv, toy_params
from helpers.seeds_env import seeds_env_config
from helpers.sp500_env import sp500_returns_spec
from learner_controls import (
    BUDGET_SHARES,
    MechanismProbe,
    ScaledCrossQ,
    at_budget_shares,
    budget_table,
    build_learner,
    collapse_columns,
    collapse_table,
    final_rows,
    parse_variant,
    seconds_to_skill,
    skill_table,
)
from sb3_contrib import CrossQ

from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.monitoring.collapse import CollapseThresholds
from trading_rl.training.params import AgentParams


def test_a_variant_splits_parameter_overrides_from_the_crossq_arm():
    assert parse_variant("base") == ("base", [], None)
    assert parse_variant("b256 sac_icm.agent.sac.batch_size=256") == (
        "b256",
        ["sac_icm.agent.sac.batch_size=256"],
        None,
    )
    name, overrides, crossq = parse_variant("cq learner=crossq crossq.qf=[256,256] sac_icm.agent.sac.gamma=0.9")
    assert (name, overrides, crossq) == ("cq", ["sac_icm.agent.sac.gamma=0.9"], {"qf": [256, 256]})
    with pytest.raises(SystemExit, match="learner must be sac or crossq"):
        parse_variant("x learner=td3")
    with pytest.raises(SystemExit, match="expected dotted.key=value"):
        parse_variant("x gamma")


def _curve(captures: list[float], seed: int = 0) -> pd.DataFrame:
    steps = np.arange(1, len(captures) + 1) * 1000
    return pd.DataFrame(
        {
            "variant": "base",
            "family": "fast",
            "market": "fast:0.25",
            "realisation": 1,
            "seed": seed,
            "step": steps,
            "train_seconds": steps / 100.0,
            "capture": captures,
            "final": steps == steps[-1],
        }
    )


def test_time_to_skill_separates_a_first_crossing_from_holding_the_bar():
    runs = pd.concat([_curve([0.1, 0.6, -0.2, 0.7, 0.8]), _curve([0.1, 0.2, 0.3, 0.4, 0.45], seed=1)])
    found = seconds_to_skill(runs, 0.5).set_index("seed")
    assert (found.loc[0, "steps_reached"], found.loc[0, "steps_held"]) == (2000, 4000)
    assert (found.loc[0, "seconds_reached"], found.loc[0, "train_seconds"]) == (20.0, 50.0)
    assert np.isnan(found.loc[1, "steps_reached"]) and np.isnan(found.loc[1, "steps_held"])
    assert found.loc[0, "late_swing"] == pytest.approx(0.5)  # steps 3000-5000: |0.7 + 0.2|, |0.8 - 0.7|
    assert found.loc[0, "late_negative"] == pytest.approx(1 / 3)


def test_null_runs_alone_have_no_time_to_skill():
    assert skill_table(_curve([0.1, 0.2]).assign(family="null"), 0.5) == "(no run with a curve on an edge family)"


def test_final_checkpoints_are_paired_with_the_reference_variant():
    base = _curve([0.2, 0.9])
    other = _curve([0.3, 0.4]).assign(variant="b256")
    unpaired = _curve([0.1, 0.5], seed=7).assign(variant="b256")
    final = final_rows(pd.concat([base, other, unpaired]), "base")
    assert list(final["capture"]) == [0.9, 0.4, 0.5]
    assert list(final["input"]) == ["", "base", ""] and list(final["agent"]) == ["base", "b256", "b256"]


def test_a_policy_that_only_holds_is_flagged_collapsed_and_a_trading_one_is_not():
    held = pd.DataFrame({"action_raw": [0.02, -0.05, 0.0, 0.08], "action_type": ["hold"] * 4})
    found = collapse_columns(held, hold_threshold=0.1, thresholds=CollapseThresholds())
    assert found["collapsed"] and found["action_entropy"] == 0.0 and found["hold_share"] == 1.0
    assert found["trade_rate"] == 0.0
    trading = pd.DataFrame(
        {"action_raw": [0.9, -0.9, 0.3, -0.3, 0.0, 0.7], "action_type": ["buy", "sell", "buy", "sell", "hold", "buy"]}
    )
    found = collapse_columns(trading, hold_threshold=0.1, thresholds=CollapseThresholds())
    assert not found["collapsed"] and found["trade_rate"] == pytest.approx(5 / 6)
    assert found["action_dominance"] == pytest.approx(2 / 6)  # strong_buy, the largest bucket


def test_the_collapse_rate_is_paired_with_the_reference_on_the_same_runs():
    def final(variant: str, flags: list[bool]) -> pd.DataFrame:
        runs = _curve([0.0]).iloc[[0] * len(flags)].assign(seed=range(len(flags)), variant=variant)
        return runs.assign(collapsed=flags, action_entropy=0.5, trade_rate=0.1)

    rows = pd.concat([final("off", [True, True, True, False]), final("icm", [True, False, False, False])])
    table = collapse_table(rows, "off")
    assert "| fast | off | 4 | 3/4 [0.25, 0.99] | 0.50 | 0.10 | — |" in table  # exact 90% interval
    assert "| fast | icm | 4 | 1/4 " in table and "| -0.50 [" in table and "(4 pairs)" in table
    assert collapse_table(rows.drop(columns="collapsed"), "off").startswith("(no collapse columns")


def test_the_crossq_arm_reads_its_rewards_times_the_learners_scale(monkeypatch):
    params = AgentParams.from_mapping({**toy_params(icm=False), "reward_scale": 10.0}, "sac_icm.agent")
    model = build_learner(ToyTradingEnv(), params, seed=0, crossq={"qf": [16, 16]})
    assert isinstance(model, ScaledCrossQ) and model.policy.net_arch == {"pi": [32, 32], "qf": [16, 16]}
    model.learn(40)  # past learning_starts (32): CrossQ's own update ran on scaled batches
    seen = {}

    def sample_in_train(self, gradient_steps, batch_size=64):
        np.random.seed(0)
        seen["rewards"] = self.replay_buffer.sample(8).rewards

    monkeypatch.setattr(CrossQ, "train", sample_in_train)
    model.train(1, 8)
    np.random.seed(0)
    assert th.allclose(seen["rewards"], 10.0 * model.replay_buffer.sample(8).rewards)
    assert "sample" not in vars(model.replay_buffer)  # the scaling is gone after the update


def _budget_curves() -> pd.DataFrame:
    """Two variants on two seeds, scored every 2,500 steps of a 10,000-step budget."""
    runs = []
    for seed, base, aux in (
        (0, [0.0, 0.2, 0.4, 0.6], [0.1, 0.5, 0.5, 0.9]),
        (1, [0.2, 0.2, 0.2, 0.2], [0.2, 0.0, 0.6, 0.3]),
    ):
        for variant, captures in (("base", base), ("aux", aux)):
            curve = _curve(captures, seed=seed).assign(variant=variant, step=lambda c: c["step"] * 2.5)
            runs.append(curve.assign(skill=curve["capture"] > 0.3))
    return pd.concat(runs)


def test_checkpoints_at_shares_of_the_budget_need_a_curve_that_divides_them():
    points = at_budget_shares(_budget_curves(), BUDGET_SHARES)
    seed0 = points[(points["variant"] == "aux") & (points["seed"] == 0)]
    assert list(seed0["step"]) == [2500, 5000, 10000] and list(seed0["capture"]) == [0.1, 0.5, 0.9]
    with pytest.raises(ValueError, match="no checkpoint at 25% of its 5000-step budget.*--curve-every"):
        at_budget_shares(_curve([0.1, 0.2, 0.3, 0.4, 0.5]), BUDGET_SHARES)


def test_the_budget_table_pairs_each_share_with_the_reference_at_the_same_step():
    lines = budget_table(_budget_curves(), "base").splitlines()
    rows = {tuple(cell.strip() for cell in line.split("|")[2:4]): line for line in lines[2:]}
    assert "| 2 | 0.10 [0.00, 0.20] | 0/2 | — | 0 |" in rows[("base", "25% (2500)")]
    # aux - base at 50%: seed 0 +0.3, seed 1 -0.2; at 100%: +0.3, +0.1
    assert "| 1/2 | 0.05 [-0.20, 0.30] | 2 |" in rows[("aux", "50% (5000)")]
    assert "| 0.20 [0.10, 0.30] | 2 |" in rows[("aux", "100% (10000)")]
    with_stage = _budget_curves().assign(curriculum_stage=2, aux_update_share=0.25)
    assert budget_table(with_stage, "base").splitlines()[-1].endswith("| aux share 0.25, stage 2–2 |")


def _sp500_spec():
    splits = {
        "train": {"start": "2004-01-01", "end": "2008-12-31"},
        "validation": {"start": "2009-01-01", "end": "2010-12-31"},
    }
    return sp500_returns_spec("2003-01-01", "2010-12-31", splits, seeds_env_config(episode_length=100))


def test_the_probe_reads_the_heads_share_of_the_encoder_and_the_curriculum_stage():
    small = {
        "sac": {"learning_starts": 32, "batch_size": 32, "buffer_size": 2000},
        "policy": {"net_arch": [16, 16]},
        "icm": {"enabled": False},
        "auxiliary": {"enabled": True, "latent_dim": 8, "hidden_dim": 16},
        "curriculum": {"enabled": True, "episode_length": 30},
    }
    model = build_agent(
        _sp500_spec().make_env("train", seed=0), AgentParams.from_mapping(small, "sac_icm.agent"), 0, "cpu"
    )
    probe = MechanismProbe(model)
    model.learn(96)
    read = probe.read()
    assert 0.0 < read["aux_update_share"] < 1.0 and read["aux_total_loss"] > 0.0
    assert (read["curriculum_stage"], read["curriculum_episodes"]) == (0, 3)  # 96 steps: 3 episodes of 30
    model.actor.optimizer.step = lambda *args, **kwargs: None  # the actor no longer moves the encoder
    model.learn(32, reset_num_timesteps=False)
    assert probe.read()["aux_update_share"] == pytest.approx(1.0)
    assert MechanismProbe(build_learner(_sp500_spec().make_env("train"), AgentParams(), 0, None)).read() == {}

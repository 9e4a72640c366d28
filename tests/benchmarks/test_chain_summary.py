"""benchmarks/chain_summary and chain_controls' parameter plumbing: each phase's agent paired with its
input on the same market and seed, the issue's verdicts, the table; the synthetic market and budget
scaling the benchmark runs the chain with. No training."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from chain_controls import STEP_KEYS, market_params, read_rows, scaled_budgets
from chain_summary import (
    alignment_table,
    markdown_table,
    paired_metrics,
    paired_metrics_table,
    paired_rows,
    plot,
    summarise_agents,
)
from learning_curve import load_parameters


def _runs(family: str, agent: str, source: str, captures: list[float], skills: list[bool] | None = None) -> list[dict]:
    skills = skills or [True] * len(captures)
    return [
        {
            "family": family,
            "market": f"{family}:0.25",
            "realisation": 1 + index // 2,
            "seed": index % 2,
            "agent": agent,
            "input": source,
            "capture": capture if family != "null" else np.nan,
            "skill": skill,
            "agent_sharpe": 1.0,
            "agent_ir": 2.0 * capture if family != "null" else 0.1,
        }
        for index, (capture, skill) in enumerate(zip(captures, skills))
    ]


def _table() -> pd.DataFrame:
    rows = (
        _runs("fast", "sac_icm", "", [0.8, 0.6, 0.7, 0.9])
        + _runs("fast", "options_her", "sac_icm", [0.7, 0.6, 0.65, 0.85])  # keeps >= 90% of the source's
        + _runs("fast", "reward_shaper", "sac_icm", [0.1, -0.6, 0.3, 0.2])  # loses it
        + _runs("null", "sac_icm", "", [0.0] * 4, [False, False, True, False])
        + _runs("null", "options_her", "sac_icm", [0.0] * 4, [False] * 4)
    )
    return pd.DataFrame(rows)


def test_each_run_is_paired_with_its_input_on_the_same_market_and_seed():
    pairs = paired_rows(_table())
    shaped = pairs[(pairs["family"] == "fast") & (pairs["agent"] == "reward_shaper")].sort_values(
        ["realisation", "seed"]
    )
    assert shaped["capture_input"].tolist() == [0.8, 0.6, 0.7, 0.9]
    assert np.allclose(shaped["delta"], [0.1 - 0.8, -0.6 - 0.6, 0.3 - 0.7, 0.2 - 0.9])
    assert set(pairs["agent"]) == {"options_her", "reward_shaper"}  # the root has no input


def test_a_run_whose_input_run_is_missing_is_refused():
    table = _table()
    table = table[~((table["agent"] == "sac_icm") & (table["seed"] == 1) & (table["family"] == "fast"))]
    with pytest.raises(ValueError, match="no run of their input agent"):
        paired_rows(table)


def test_verdicts_follow_the_issue_bar():
    summary = summarise_agents(_table()).set_index(["family", "agent"])
    source = summary.loc[("fast", "sac_icm")]
    assert source["capture_median"] == pytest.approx(0.75) and source["capture_min"] == pytest.approx(0.6)
    assert source["verdict"] == "pass" and source["pairs"] == 0
    kept = summary.loc[("fast", "options_her")]
    assert kept["share_of_input"] == pytest.approx(0.675 / 0.75)  # 0.9: exactly the bar
    assert kept["verdict"] == "pass"
    lost = summary.loc[("fast", "reward_shaper")]
    assert lost["delta_median"] == pytest.approx(np.median([-0.7, -1.2, -0.4, -0.7]))
    assert lost["delta_ci90_high"] < 0
    assert lost["verdict"] == "fail: median, floor, paired"
    # null: skill in 1 of 4 runs is over the 10% false-positive bar; 0 of 4 passes
    assert summary.loc[("null", "sac_icm")]["verdict"] == "fail"
    assert summary.loc[("null", "options_her")]["verdict"] == "pass"


def test_an_input_that_took_nothing_is_judged_by_the_sign_of_the_paired_difference():
    rows = _runs("fast", "sac_icm", "", [0.0, -0.1, 0.0, 0.05]) + _runs("fast", "options_her", "sac_icm", [0.6] * 4)
    summary = summarise_agents(pd.DataFrame(rows)).set_index("agent")
    assert np.isnan(summary.loc["options_her", "share_of_input"])
    assert summary.loc["options_her", "verdict"] == "pass"


def test_table_and_plot(tmp_path):
    table = _table()
    text = markdown_table(summarise_agents(table))
    assert text.count("\n") == 2 + 5
    assert "| fast | reward_shaper | sac_icm | 4 |" in text
    plot(table, tmp_path / "chain.png")
    assert (tmp_path / "chain.png").stat().st_size > 0


def test_the_market_is_the_traded_synthetic_symbol_split_by_fraction():
    params = market_params(load_parameters("base"), "fast:0.25", 2, 4000)
    [entry] = params["feature_extraction"]["symbols"]
    assert entry == {
        "name": "fast_0.25_r2",
        "source": "synthetic",
        "market": {"family": "fast", "strength": 0.25, "n_bars": 4000, "seed": 2},
    }
    assert params["env_construction"]["symbol"] == "fast_0.25_r2"
    assert params["feature_extraction"]["splits"] == {"train_fraction": 0.7, "validation_fraction": 0.15}


def test_budget_scale_shrinks_every_step_budget_and_nothing_else():
    params = load_parameters("base")
    scaled = scaled_budgets(params, 0.1)
    assert scaled["sac_icm"]["agent"]["training"]["total_timesteps"] == round(
        0.1 * params["sac_icm"]["agent"]["training"]["total_timesteps"]
    )
    assert scaled["reward_shaper"]["training"]["continue_timesteps"] == round(
        0.1 * params["reward_shaper"]["training"]["continue_timesteps"]
    )
    assert scaled["options_her"]["sac"]["learning_starts"] == params["options_her"]["sac"]["learning_starts"]
    assert scaled["sac_icm"]["agent"]["sac"]["batch_size"] == params["sac_icm"]["agent"]["sac"]["batch_size"]
    assert scaled_budgets(params, 1.0) is params
    assert all(key.count(".") >= 2 for key in STEP_KEYS)


def test_rows_read_back_keep_the_null_family_and_the_missing_scores(tmp_path):
    """pandas reads ``null`` as missing by default: the null control's rows would vanish from a
    ``--from-csv`` summary."""
    path = tmp_path / "rows.csv"
    pd.DataFrame({"family": ["null", "fast"], "capture": [float("nan"), 0.5]}).to_csv(path, index=False)
    rows = read_rows(str(path))
    assert rows["family"].tolist() == ["null", "fast"]
    assert rows["capture"].isna().tolist() == [True, False]


def test_risk_metrics_are_paired_with_the_input_run_and_flat_runs_counted():
    table = _table()
    table["max_drawdown"] = np.where(table["agent"] == "reward_shaper", -0.01, -0.05)
    table["went_flat"] = table["agent"] == "reward_shaper"
    paired = paired_metrics(table[table["family"] == "fast"])
    shaped = paired[paired["agent"] == "reward_shaper"].iloc[0]
    assert shaped["pairs"] == 4 and shaped["went_flat"] == 4
    assert np.isclose(shaped["max_drawdown_delta"], 0.04)  # a shallower drawdown is a positive difference
    assert np.isclose(shaped["agent_sharpe_delta"], 0.0)
    assert np.isclose(shaped["capture_delta"], np.median([0.1 - 0.8, -0.6 - 0.6, 0.3 - 0.7, 0.2 - 0.9]))
    assert "oracle_exposure_corr_delta" not in paired  # not a risk family: no timing column
    text = paired_metrics_table(paired)
    assert "max_drawdown: agent / input" in text and "| 4/4 |" in text


def test_the_alignment_table_reads_each_run_against_its_shifted_control():
    """Three options runs: information above the shift control's median 0.010, 0.020 and -0.002
    nats (median +0.010), one shift test under 0.05; a flat agent's row has no option columns."""
    rows = pd.DataFrame(
        {
            "family": "regime_fast",
            "agent": ["options_her"] * 3 + ["sac_icm"],
            "option_regime_mi": [0.015, 0.030, 0.003, np.nan],
            "option_regime_mi_share": [0.03, 0.06, 0.006, np.nan],
            "option_regime_mi_null_median": [0.005, 0.010, 0.005, np.nan],
            "option_regime_p": [0.2, 0.01, 0.9, np.nan],
            "dominant_option": ["wait", "trend_follow", "wait", np.nan],
            "dominant_option_share": [0.9, 0.7, 1.0, np.nan],
        }
    )
    table = alignment_table(rows)
    [row] = [line for line in table.splitlines() if line.startswith("| regime_fast")]
    assert row.startswith("| regime_fast | options_her | 3 | 3.0% [")
    assert "| +0.0100 [" in row and "| 1/3 | wait (2), trend_follow (1); 0.70–1.00 |" in row
    assert alignment_table(rows.drop(columns=[c for c in rows if c.startswith("option_")])) == ""

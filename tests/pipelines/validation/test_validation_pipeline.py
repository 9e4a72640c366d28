"""The validation pipeline on a tiny synthetic market, through the project's own catalog entries
(files redirected to tmp_path): outputs are versioned, and a rerun after new data appends a version
and compares itself with the previous one."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers.validation_fixtures import catalog_for, market
from kedro.runner import SequentialRunner

from trading_rl.evaluation.ledger.ledger import read_ledger
from trading_rl.pipelines.validation import create_pipeline


def versions(root: Path, relative: str) -> list[str]:
    return sorted(path.name for path in (root / relative).iterdir())


@pytest.mark.slow
def test_rerun_after_new_data_appends_versions_and_compares_with_the_previous_run(tmp_path):
    first, second = "2030-01-01T00.00.00.000Z", "2030-01-02T00.00.00.000Z"
    SequentialRunner().run(create_pipeline(), catalog_for(tmp_path, market(900), first))
    report_path = "data/08_reporting/validation/validation_report.json"
    first_report = (tmp_path / report_path / first / "validation_report.json").read_text()
    first_folds = pd.read_csv(tmp_path / "data/08_reporting/walk_forward/folds.csv" / first / "folds.csv")

    SequentialRunner().run(create_pipeline(), catalog_for(tmp_path, market(960), second))

    for relative in (
        report_path,
        "data/08_reporting/validation/validation_comparison.json",
        "data/08_reporting/walk_forward/folds.csv",
        "data/08_reporting/walk_forward/equity.png",
        "data/08_reporting/regimes/regime_metrics.csv",
        "data/08_reporting/regimes/regime_prices.png",
    ):
        assert versions(tmp_path, relative) == [first, second], relative
    assert (tmp_path / report_path / first / "validation_report.json").read_text() == first_report  # untouched

    report = json.loads((tmp_path / report_path / second / "validation_report.json").read_text())
    assert set(report["gates"]) >= {
        "positive_sharpe_windows",
        "profitable_regimes",
        "sharpe",
        "max_drawdown",
        "win_rate",
        "action_entropy",
        "action_dominance",
        "trade_frequency",
    }
    for gate in report["gates"].values():
        assert {"value", "threshold", "comparison", "passed", "status"} <= set(gate)
    assert report["passed"] == (not report["failed"])
    # the skill gate (alpha's lower 90% bound on the stitched series) is reported, not blocking
    assert report["gates"]["skill"]["metric"] == "alpha_ci90_low_median" and not report["gates"]["skill"]["blocking"]
    assert "skill" not in report["failed"] and "gate/skill_seed_share" in report["metrics"]
    regimes_table = pd.read_csv(
        tmp_path / "data/08_reporting/regimes/regime_metrics.csv" / second / "regime_metrics.csv"
    )
    assert regimes_table.loc[regimes_table["model"] == "sac_icm", "beta"].notna().any()

    comparison_path = tmp_path / "data/08_reporting/validation/validation_comparison.json"
    assert json.loads((comparison_path / first / "validation_comparison.json").read_text())["has_previous"] is False
    comparison = json.loads((comparison_path / second / "validation_comparison.json").read_text())
    assert comparison["has_previous"] is True and comparison["previous_run"]["save_version"] == first

    # The new bars moved the windows: the latest test window ends on the newest bar.
    folds = pd.read_csv(tmp_path / "data/08_reporting/walk_forward/folds.csv" / second / "folds.csv")
    assert pd.Timestamp(folds["test_end"].max()) == market(960).index[-1]
    assert pd.Timestamp(folds["test_end"].max()) > pd.Timestamp(first_folds["test_end"].max())
    assert set(folds["agent"]) == {"sac_icm", "buy_and_hold", "cash", "random", "sma_crossover", "buy_and_hold_full"}
    # Each run appended its trial; the same configuration twice is one trial for DSR.
    assert len(read_ledger(tmp_path / "data/08_reporting/trial_ledger")) == 2

    # Regimes are measured on the same walk-forward agents and test steps, never on the test split.
    regimes = pd.read_csv(tmp_path / "data/08_reporting/regimes/regime_metrics.csv" / second / "regime_metrics.csv")
    assert set(regimes["model"]) == set(folds["agent"]) and "split" not in regimes
    agent_steps = regimes[(regimes["model"] == "sac_icm") & (regimes["regime"] == "all")]
    assert agent_steps["n_steps"].sum() == folds.loc[folds["agent"] == "sac_icm", "n_steps"].sum()

    # The out-of-sample tearsheet draws the stitched curves walk_forward_equity holds.
    equity = pd.read_parquet(
        tmp_path / "data/07_model_output/walk_forward_equity.parquet" / second / "walk_forward_equity.parquet"
    )
    rollout = pd.read_parquet(
        tmp_path / "data/08_reporting/walk_forward_rollout.parquet" / second / "walk_forward_rollout.parquet"
    )
    agent = rollout[rollout["agent"] == "sac_icm seed 0"]
    assert agent["equity_index"].to_numpy() == pytest.approx(
        equity[(equity["agent"] == "sac_icm") & (equity["seed"] == 0)]["equity"].to_numpy()
    )
    assert versions(tmp_path, "data/08_reporting/walk_forward/tearsheet.html") == [first, second]
    page = (tmp_path / "data/08_reporting/walk_forward/tearsheet.html" / second / "tearsheet.html").read_text()
    assert "walk_forward: X, stitched out-of-sample test windows" in page
    assert 'data-panel="attribution"' in page and "<th>sac_icm seed 0</th>" in page


def test_validation_reads_neither_the_phase_model_nor_the_env_spec():
    assert not {"sac_icm_model", "env_spec"} & create_pipeline().inputs()

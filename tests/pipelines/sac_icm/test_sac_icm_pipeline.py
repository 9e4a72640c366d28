"""sac_icm in a Kedro session (ci budgets) on top of the foundation outputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.mlflow_store import copy_without_runs

from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
from trading_rl.envs import EnvSpec
from trading_rl.integration.datasets import SB3ModelDataset


def _latest(project: Path, relative: str) -> Path:
    return sorted((project / relative).iterdir())[-1] / Path(relative).name


@pytest.mark.slow
def test_sac_icm_session_saves_restorable_model_and_reports(sac_icm_project):
    """The ci session's outputs (``sac_icm_project`` ran it; final_evaluation evaluates the same model)."""
    model_path = _latest(sac_icm_project, "data/06_models/sac_icm_model.zip")
    model = SB3ModelDataset(
        str(model_path), model_class="trading_rl.algorithms.sac_icm.sac_icm.SACWithICM", device="cpu"
    ).load()
    assert isinstance(model, SACWithICM) and model.icm is not None
    metadata = model.trading_rl_metadata
    assert {"seed", "config_hash", "git_commit", "symbol"} <= set(metadata)

    spec = EnvSpec.from_bytes(_latest(sac_icm_project, "data/05_model_input/env_spec.zip").read_bytes())
    env = spec.make_env("validation")
    obs, _ = env.reset(seed=0)
    batch = np.stack([obs] * 4)
    reloaded = SB3ModelDataset(
        str(model_path), model_class="trading_rl.algorithms.sac_icm.sac_icm.SACWithICM", device="cpu"
    ).load()
    np.testing.assert_array_equal(
        model.predict(batch, deterministic=True)[0], reloaded.predict(batch, deterministic=True)[0]
    )

    report = json.loads(_latest(sac_icm_project, "data/08_reporting/sac_icm_evaluation_report.json").read_text())
    assert report["split"] == "validation"
    assert {"buy_and_hold", "cash", "random", "sma_crossover"} <= set(report["baselines"])
    assert report["baselines"]["cash"]["total_return"] == 0.0
    assert report["n_steps"] == spec.splits["validation"]["n_bars"] - 1
    # return attribution of the agent and of every baseline against the market line
    for metrics in (report["metrics"], report["baselines"]["buy_and_hold"]):
        assert {"alpha_annual", "alpha_ci90_low", "alpha_ci90_high", "beta", "mean_exposure"} <= set(metrics)
        assert {"exposure_matched_sharpe", "timing_corr", "sharpe_se"} <= set(metrics)
    assert report["baselines"]["cash"]["beta"] == 0.0
    collapse = json.loads(_latest(sac_icm_project, "data/08_reporting/sac_icm_collapse_report.json").read_text())
    assert {g["gate"] for g in collapse["deterministic"]["gates"]} == {"dominance", "entropy", "trade_rate"}
    history = json.loads(_latest(sac_icm_project, "data/07_model_output/sac_icm_training_history.json").read_text())
    assert history[-1]["timestep"] >= 400
    assert not (sac_icm_project / "data/06_models/resume/sac_icm/sp500/resume_checkpoint.pkl").exists()

    # the shared evaluation step: rollout parquet, one PNG per section and the HTML page, one version
    import pandas as pd

    from trading_rl.evaluation.reporting.tearsheet_panels import PANELS

    rollout = pd.read_parquet(_latest(sac_icm_project, "data/08_reporting/sac_icm_rollout.parquet"))
    assert set(rollout["agent"]) == {"sac_icm", "buy_and_hold", "cash", "random", "sma_crossover", "buy_and_hold_full"}
    assert {"return", "position", "action_raw", "trade_value", "fill_price"} <= set(rollout.columns)
    assert (rollout["agent"] == "sac_icm").sum() == report["n_steps"]
    html = _latest(sac_icm_project, "data/08_reporting/sac_icm_tearsheet.html").read_text()
    assert all(title in html for title in PANELS.values())
    assert 'data-panel="attribution"' in html and "exposure-matched Sharpe" in html
    # the verdict banner reads this run's collapse report; the header names symbol, costs and cap
    verdict = "FAIL" if collapse["collapsed"] else "PASS"
    assert f'data-verdict="{verdict}"' in html and "<b>sac_icm_collapse_report</b>" in html
    assert all(f"<th>{fact}</th>" in html for fact in ("symbol", "bars", "costs", "position cap"))
    pngs = list(_latest(sac_icm_project, "data/08_reporting/sac_icm_tearsheet").glob("*.png"))
    assert len(pngs) == 1 and pngs[0].stat().st_size > 10_000
    versions = {
        _latest(sac_icm_project, path).parent.name
        for path in (
            "data/08_reporting/sac_icm_rollout.parquet",
            "data/08_reporting/sac_icm_tearsheet.html",
            "data/08_reporting/sac_icm_tearsheet",
            "data/06_models/sac_icm_model.zip",
        )
    }
    assert len(versions) == 1


@pytest.mark.slow
def test_sac_icm_session_with_auxiliary_heads_and_curriculum(foundation_project, kedro_run, tmp_path):
    """Both phase-E parts on in --env ci: per-head losses fall in the history, the curriculum reports
    its stage (and why it stays) there, and the saved model carries its heads."""
    short_episodes = {"enabled": True, "episode_length": 60, "min_episodes": 2, "window": 2, "success_rate": 0.5}
    project = copy_without_runs(foundation_project, tmp_path / "project")
    kedro_run(
        project,
        ["sac_icm"],
        runtime_params={"sac_icm": {"agent": {"auxiliary": {"enabled": True}, "curriculum": short_episodes}}},
    )

    history = json.loads(_latest(project, "data/07_model_output/sac_icm_training_history.json").read_text())
    first, last = history[0], history[-1]
    for head in ("next_return", "volatility", "volume", "regime"):
        assert last[f"aux/{head}_loss"] < first[f"aux/{head}_loss"], head
    assert last["curriculum/episodes"] >= 4 and isinstance(last["curriculum/held_back_by"], str)
    changes = [change for entry in history for change in entry["curriculum/changes"]]
    assert last["curriculum/stage"] == len(changes)
    model = SB3ModelDataset(
        str(_latest(project, "data/06_models/sac_icm_model.zip")),
        model_class="trading_rl.algorithms.sac_icm.sac_icm.SACWithICM",
        device="cpu",
    ).load()
    assert model.auxiliary is not None and model.auxiliary_config.weights["regime"] == 0.5

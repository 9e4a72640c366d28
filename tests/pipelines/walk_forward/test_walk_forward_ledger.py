"""The walk_forward pipeline appends one trial-ledger row per agent configuration and symbol, and its
summary's DSR counts the configurations in the whole ledger (this run's rows included)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers.synthetic_prices import random_walk_prices
from helpers.tiny import TINY_FEATURES, TINY_WALK_FORWARD, tiny_sac_icm
from kedro.io import DataCatalog
from kedro.runner import SequentialRunner

from trading_rl.evaluation.reporting.phase_tearsheet import verdicts_of
from trading_rl.pipelines.walk_forward import create_pipeline

PROJECT_ROOT = Path(__file__).resolve().parents[3]
PARAMS = {
    "seed": 7,
    "feature_extraction": TINY_FEATURES,
    "env_construction": {"symbol": "X", "periods_per_year": 252, "env": {"window_size": 5, "episode_length": 100}},
    "sac_icm": tiny_sac_icm(),
    "walk_forward": {**TINY_WALK_FORWARD, "seeds": 2, "timesteps": 40, "finetune_timesteps": 0},
    "runtime": {"engine": "sequential"},
}


def _prices() -> pd.DataFrame:
    return random_walk_prices(520, seed=3).assign(symbol="X")


def _run(root: Path, agents: list[str], save_version: str) -> dict:
    entry = yaml.safe_load((PROJECT_ROOT / "conf/base/catalog_ledger.yml").read_text())["trial_ledger"]
    moved = {"filepath": str(root / entry["filepath"]), "also_read": [str(root / path) for path in entry["also_read"]]}
    catalog = DataCatalog.from_config({"trial_ledger": {**entry, **moved}})
    catalog["prices"] = _prices()
    catalog["run_metadata"] = {"seed": 7, "save_version": save_version, "git_commit": "abc"}
    for key, value in {**PARAMS, "walk_forward": {**PARAMS["walk_forward"], "agents": agents}}.items():
        catalog[f"params:{key}"] = value
    pipeline = create_pipeline().only_nodes("walk_forward", "record_walk_forward_trials", "summarise_walk_forward")
    SequentialRunner().run(pipeline, catalog)
    return catalog.load("walk_forward_summary"), catalog.load("trial_ledger")


@pytest.mark.slow
def test_each_run_appends_its_configurations_and_the_summary_counts_the_ledger(tmp_path):
    summary, ledger = _run(tmp_path, ["sac_icm"], "v1")
    assert len(ledger) == 1 and ledger.iloc[0]["agent"] == "sac_icm" and ledger.iloc[0]["n_runs"] == 2 * 2
    assert ledger.iloc[0]["save_version"] == "v1"
    assert summary["X"]["n_trials"] == 1 and summary["X"]["agents"]["sac_icm"]["dsr_median"] is None
    # each seed's stitched series is attributed against the market line, with its standard errors
    entry = summary["X"]["agents"]["sac_icm"]
    assert {"alpha_annual", "alpha_ci90_low", "beta", "mean_exposure", "exposure_matched_sharpe"} <= set(
        entry["stitched_attribution_median"]
    )
    assert entry["standard_errors"]["sharpe_stitched"] > 0 and entry["min_detectable"]["sharpe_stitched"] > 0
    assert 0.0 <= entry["skill_seed_share"] <= 1.0
    assert "stitched_attribution_median" not in summary["X"]["agents"]["buy_and_hold_full"]
    # the tearsheet's banner: the skill gate read from this summary
    [tearsheet] = [n for n in create_pipeline().nodes if n.name == "render_walk_forward_tearsheet"]
    assert "walk_forward_summary" in tearsheet.inputs
    [verdict] = verdicts_of({"walk_forward_summary": summary})
    skill = entry["stitched_attribution_median"]["alpha_ci90_low"] > 0
    assert verdict.passed is skill and "sac_icm on X: CI above 0 in" in verdict.detail
    files = sorted((tmp_path / "data/08_reporting/trial_ledger").iterdir())

    summary, ledger = _run(tmp_path, ["sac_icm", "sac"], "v2")
    assert list(ledger["agent"]) == ["sac_icm", "sac_icm", "sac"] and list(ledger["save_version"]) == ["v1", "v2", "v2"]
    assert ledger["config_hash"].nunique() == 2  # sac_icm ran again with the same configuration
    assert sorted((tmp_path / "data/08_reporting/trial_ledger").iterdir())[:1] == files
    assert summary["X"]["n_trials"] == 2 and summary["X"]["trials_by_source"] == {"walk_forward": 2}
    assert summary["X"]["agents"]["sac_icm"]["dsr_median"] is not None
    assert "dsr_median" in summary["X"]["agents"]["cash"] and summary["X"]["agents"]["cash"]["dsr_median"] is None

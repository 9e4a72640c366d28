"""`kedro run --env ci --pipelines forward` in a project copy, through the real configuration, the
catalog and the project hooks: a deployed model on a user CSV, 20 new bars appended, and the
end-of-run summary's forward line."""

from __future__ import annotations

import json
import logging

import mlflow
import pytest
from helpers.forward_setup import SYMBOL, TRAINED_BARS, deploy, market, versions, walk_forward_folds, write_prices

from trading_rl.envs.compatibility import ModelCompatibilityError

DEPLOYED = "2026-03-01T06.00.00.000Z"


@pytest.mark.slow
def test_a_scheduled_forward_run_tracks_the_new_bars_and_ends_with_the_forward_line(
    tmp_path, project_copy, kedro_run, caplog
):
    project = project_copy(tmp_path / "project")
    write_prices(project, market(TRAINED_BARS))
    deploy(project, DEPLOYED, store=f"sqlite:///{project / 'data/ci/mlflow.db'}")  # promoted in ci's registry
    folds = project / f"data/08_reporting/walk_forward/folds.csv/{DEPLOYED}/folds.csv"
    folds.parent.mkdir(parents=True)
    walk_forward_folds().to_csv(folds, index=False)
    manifest = project / f"data/09_runs/run_manifest.json/{DEPLOYED}/run_manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"save_version": DEPLOYED}))  # the deploying run completed
    write_prices(project, market(TRAINED_BARS + 20))

    symbols = {
        "feature_extraction": {"symbols": [{"name": "sp500", "source": "packaged"}, {"name": SYMBOL, "source": "file"}]}
    }
    # ci's env_construction.symbol is sp500: the run would score SYN under sp500's name and tags
    with pytest.raises(ModelCompatibilityError) as raised:
        kedro_run(project, ["forward"], runtime_params=symbols)
    message = str(raised.value)
    for expected in (
        f"dataset 'deployed_model' (version {DEPLOYED}) trades symbol '{SYMBOL}'",
        "parameter 'env_construction.symbol' is 'sp500'",
        f"--pipelines forward --params env_construction.symbol={SYMBOL}",
    ):
        assert expected in message, (expected, message)
    assert not versions(project, "data/07_model_output/forward_record.parquet")

    with caplog.at_level(logging.INFO):
        kedro_run(project, ["forward"], runtime_params={**symbols, "env_construction": {"symbol": SYMBOL}})
    run = mlflow.last_active_run()
    assert run.data.tags["trading_rl.symbol"] == SYMBOL
    # the rerun's metrics and its alert gate in MLflow
    assert run.data.metrics["forward/n_bars"] == 20 and "forward/total_return" in run.data.metrics
    assert run.data.metrics["forward/alerts"] == len(
        json.loads(versions(project, "data/08_reporting/forward/forward_alerts.json")[-1].read_text())["alerts"]
    )
    assert run.data.tags["gate.forward_alerts"] in {"passed", "FAILED"}

    report = json.loads(versions(project, "data/08_reporting/forward/forward_report.json")[-1].read_text())
    assert (report["status"], report["model_version"], report["n_bars"], report["new_bars"]) == (
        "tracked",
        DEPLOYED,
        20,
        20,
    )
    assert f"deployed {DEPLOYED} on {SYMBOL}, 20 bars since" in caplog.text
    # the forward record's return attribution against the market line on the same bars
    assert {"alpha_annual", "alpha_ci90_low", "beta", "mean_exposure", "exposure_matched_sharpe"} <= set(
        report["metrics"]
    )
    assert report["deployment"]["version"] == 1
    assert "forward: deployed trading_rl_sac_icm@champion is version 1, promoted by benchmark" in caplog.text
    assert versions(project, "data/07_model_output/forward_record.parquet")

"""Three scheduled reruns of the forward pipeline (the project's catalog entries under tmp_path):
the price file ends at D and the agent is trained, then 20 bars are appended and the pipeline reruns,
then 20 more bars carrying a volatility x4 regime break, and it reruns again."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.forward_setup import (
    MODEL_DATASET,
    SYMBOL,
    TRAINED_BARS,
    deploy,
    market,
    rerun,
    versions,
    write_prices,
)
from helpers.shared_setup import shared_folder

from trading_rl.data import load_prices
from trading_rl.envs.deployment import Deployment
from trading_rl.evaluation.metrics.metrics import sharpe_ratio
from trading_rl.integration.datasets import SB3ModelDataset
from trading_rl.phases.forward import ForwardRecordError, forward_data, replay

RECORD = "data/07_model_output/forward_record.parquet"
ALERTS = "data/08_reporting/forward/forward_alerts.json"
DRIFT = "data/08_reporting/forward/forward_drift.json"
ALERTS_FILE = "data/08_reporting/alerts/alerts.jsonl"  # run_forward's alerting.channels.jsonl under the root
RUNS = ["2026-02-01T06.00.00.000Z", "2026-02-02T06.00.00.000Z", "2026-02-03T06.00.00.000Z"]
VOLATILITY_FEATURES = ["realized_vol_20", "hl_range"]
DIGESTS = "record_digests_after_each_rerun.json"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def three_reruns(request):
    """The root after the three reruns (tests only read it: one build for both xdist workers) and,
    after each rerun, the digest of every forward record version."""

    def build(root: Path) -> None:
        write_prices(root, market(TRAINED_BARS))
        deploy(root, "2026-01-31T06.00.00.000Z")
        digests = []
        files = [market(TRAINED_BARS), market(TRAINED_BARS + 20), market(TRAINED_BARS + 40, break_at=TRAINED_BARS + 20)]
        for run, prices in zip(RUNS, files):
            write_prices(root, prices)
            rerun(root, run)
            digests.append({str(path): _digest(path) for path in versions(root, RECORD)})
        (root / DIGESTS).write_text(json.dumps(digests))

    root = shared_folder(request, "forward_three_reruns", build)
    return root, json.loads((root / DIGESTS).read_text())


@pytest.mark.slow
def test_the_record_grows_by_exactly_the_new_bars_once_each(three_reruns):
    root, _ = three_reruns
    records = [pd.read_parquet(path) for path in versions(root, RECORD)]
    assert [len(record) for record in records] == [0, 20, 40]
    final = records[-1]
    file_bars = load_prices(SYMBOL, source="file", path=root / f"data/01_raw/prices/{SYMBOL}.csv").index
    # no bar twice, no gap: exactly the bars after the deployment's last bar, in order
    assert final["timestamp"].is_unique
    assert list(final["timestamp"]) == list(file_bars[TRAINED_BARS:])
    assert list(final["scored_in"]) == [RUNS[1]] * 20 + [RUNS[2]] * 20
    pd.testing.assert_frame_equal(final.iloc[:20], records[1])  # the earlier bars, bit for bit


@pytest.mark.slow
def test_earlier_versions_are_untouched(three_reruns):
    root, digests = three_reruns
    final = {str(path): _digest(path) for path in versions(root, RECORD)}
    for after_run in digests:
        assert {path: final[path] for path in after_run} == after_run


@pytest.mark.slow
def test_the_stitched_record_is_one_evaluation_over_the_same_bars(three_reruns):
    root, _ = three_reruns
    record = pd.read_parquet(versions(root, RECORD)[-1])
    model = SB3ModelDataset(
        str(versions(root, MODEL_DATASET["filepath"])[0]), MODEL_DATASET["model_class"], device="cpu"
    ).load()
    prices = load_prices(SYMBOL, source="file", path=root / f"data/01_raw/prices/{SYMBOL}.csv")
    single = replay(model, forward_data(Deployment.from_model(model), prices, "the whole file"))
    np.testing.assert_array_equal(record["return"].to_numpy(), single["return"].to_numpy())
    assert abs(sharpe_ratio(record["return"], 252) - sharpe_ratio(single["return"], 252)) < 1e-9


@pytest.mark.slow
def test_alerts_fire_on_the_regime_break_appended_as_new_data(three_reruns):
    root, _ = three_reruns
    before, after = (json.loads(path.read_text()) for path in versions(root, DRIFT)[1:])
    assert not set(VOLATILITY_FEATURES) & set(before["drifted_features"])
    assert set(VOLATILITY_FEATURES) <= set(after["drifted_features"])
    alerts = json.loads(versions(root, ALERTS)[-1].read_text())
    assert not alerts["passed"] and "feature_drift" in alerts["alerts"]
    check = next(c for c in alerts["checks"] if c["check"] == "feature_drift")
    assert "realized_vol_20" in check["meaning"]
    first = json.loads(versions(root, ALERTS)[0].read_text())
    assert (first["status"], first["passed"]) == ("not checked", None)  # not "passed": nothing was checked
    assert first["reason"].startswith("no bar after the deployed model's data end")


@pytest.mark.slow
def test_the_regime_break_reaches_the_alerts_file_of_the_reruns(three_reruns):
    """The reruns append to one JSON-lines file (nothing from the first: no bar yet); the regime
    break's drifted features arrive as a ``feature_drift`` alert stamped with the newest bar."""
    root, _ = three_reruns
    lines = [json.loads(line) for line in (root / ALERTS_FILE).read_text().splitlines()]
    drift = [line for line in lines if line["rule"] == "feature_drift" and line["bar"] == 40]
    assert drift and set(VOLATILITY_FEATURES) <= set(drift[0]["context"]["drifted_features"])
    assert {line["bar"] for line in lines} <= {20, 40} and all(line["context"]["source"] == "forward" for line in lines)


@pytest.mark.slow
def test_the_forward_tearsheet_shows_equity_since_deployment_and_the_drift_table(three_reruns):
    root, _ = three_reruns
    html = versions(root, "data/08_reporting/forward/forward_tearsheet.html")[-1].read_text()
    assert "forward: SYN, forward split" in html and "realized_vol_20: PSI" in html and "DRIFTED" in html
    rollout = pd.read_parquet(versions(root, "data/08_reporting/forward/forward_rollout.parquet")[-1])
    assert {"deployed", "buy_and_hold", "cash"} <= set(rollout["agent"])
    assert (rollout["agent"] == "deployed").sum() == 40


@pytest.mark.slow
def test_a_revised_past_bar_is_refused_and_nothing_is_written(three_reruns, tmp_path):
    root = shutil.copytree(three_reruns[0], tmp_path / "root")  # the other tests read the fixture's files
    prices = market(TRAINED_BARS + 41, break_at=TRAINED_BARS + 20)
    prices.iloc[TRAINED_BARS + 5, prices.columns.get_loc("close")] *= 0.999  # a vendor revised a scored bar
    write_prices(root, prices)
    before = versions(root, RECORD)
    with pytest.raises(ForwardRecordError, match="does not reproduce the stored forward record"):
        rerun(root, "2026-02-04T06.00.00.000Z")
    assert versions(root, RECORD) == before


@pytest.mark.slow
def test_the_report_names_the_registry_version_it_traded_and_why(three_reruns):
    root, _ = three_reruns
    report = json.loads(versions(root, "data/08_reporting/forward/forward_report.json")[-1].read_text())
    deployment = report["deployment"]
    assert (deployment["status"], deployment["version"], deployment["alias"]) == ("deployed", 1, "champion")
    assert deployment["save_version"] == report["model_version"] and deployment["promoted_by"] == "benchmark"
    assert deployment["reason"].startswith("trading_rl_sac_icm@champion is version 1, promoted by benchmark")


@pytest.mark.slow
def test_without_a_promoted_model_the_rerun_says_not_checked_and_why(tmp_path):
    write_prices(tmp_path, market(TRAINED_BARS))
    deploy(tmp_path, RUNS[0], store=f"sqlite:///{tmp_path / 'elsewhere.db'}")  # the newest file, but not promoted here
    rerun(tmp_path, RUNS[1])
    report = json.loads(versions(tmp_path, "data/08_reporting/forward/forward_report.json")[0].read_text())
    alerts = json.loads(versions(tmp_path, ALERTS)[0].read_text())
    assert (
        report["status"] == "not checked"
        and "no version of 'trading_rl_sac_icm' carries alias @champion" in (report["reason"])
    )
    assert (alerts["status"], alerts["passed"], alerts["alerts"]) == ("not checked", None, [])
    assert alerts["reason"] == report["reason"]
    assert pd.read_parquet(versions(tmp_path, RECORD)[0]).empty


def test_a_model_trained_before_deployment_metadata_is_reported_not_fatal(caplog):
    from trading_rl.phases.forward import NotDeployed, prepare_forward_data

    class OldModel:
        trading_rl_metadata = {"save_version": "2025-01-01T00.00.00.000Z", "symbol": SYMBOL}

    data = prepare_forward_data(OldModel(), {"reason": "version 1"}, {}, {})
    assert data == NotDeployed("deployed model has no deployment metadata")
    assert "carries no deployment metadata" in caplog.text

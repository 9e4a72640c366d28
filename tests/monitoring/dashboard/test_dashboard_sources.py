"""The dashboard's readers: the newest Kedro version read, every missing source an ``info`` and every
unreadable one an ``error`` naming the file (never an exception), the champion and its gate
verdicts read from the registry as the promote pipeline leaves them, a missing MLflow store left
uncreated, and the sources' arguments read back as written."""

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from helpers.dashboard_sources import GATES, MODEL, SYMBOL, VERSION, forward_record, register_champion, write_versioned
from helpers.mlflow_store import empty_store
from helpers.synthetic_prices import random_walk_prices

from trading_rl.monitoring.alerting import Alert, JsonLinesChannel, Level
from trading_rl.monitoring.dashboard.sources import (
    Champion,
    DashboardSources,
    SourceProblem,
    read_alerts,
    read_champions,
    read_forward_record,
    read_prices_for,
    read_stored_json,
    stored_file,
)

OLDER = "2026-11-01T10.00.00.000Z"


@pytest.fixture
def record():
    return forward_record(random_walk_prices(200, seed=1), n_bars=40)


def test_the_newest_version_of_a_versioned_dataset_is_read(tmp_path, record):
    path = tmp_path / "forward_record.parquet"
    older = path / OLDER / path.name
    older.parent.mkdir(parents=True)
    record.iloc[:10].to_parquet(older)
    write_versioned(path, lambda file: record.iloc[::-1].to_parquet(file))  # stored newest first
    (path / "2099-01-01T00.00.00.000Z").mkdir()  # a version folder without its file (a run that failed)
    assert stored_file(path) == (path / VERSION / path.name, VERSION)
    loaded = read_forward_record(path)
    assert loaded.attrs["version"] == VERSION and len(loaded) == 40
    assert loaded["timestamp"].is_monotonic_increasing


def test_a_plain_file_is_read_as_it_is(tmp_path, record):
    path = tmp_path / "record.parquet"
    record.to_parquet(path)
    assert stored_file(path) == (path, None)
    assert read_forward_record(path).attrs["version"] is None


def test_an_empty_record_is_data_not_a_problem(tmp_path, record):
    path = tmp_path / "record.parquet"
    record.iloc[:0].to_parquet(path)
    loaded = read_forward_record(path)
    assert isinstance(loaded, pd.DataFrame) and loaded.empty


def test_a_missing_record_is_info_and_an_unreadable_one_an_error_naming_the_file(tmp_path, record):
    missing = read_forward_record(tmp_path / "none.parquet")
    assert missing.level == "info" and "kedro run --pipelines forward" in missing.message
    path = tmp_path / "record.parquet"
    path.write_bytes(b"PAR1 this is not parquet")
    corrupt = read_forward_record(path)
    assert corrupt.level == "error" and f"the forward record {path} is not a readable parquet file" in corrupt.message
    record.drop(columns=["equity", "position"]).to_parquet(path)
    lacking = read_forward_record(path)
    assert lacking.level == "error" and "lacks column(s) ['equity', 'position']" in lacking.message
    record.assign(equity="a lot").to_parquet(path)
    text = read_forward_record(path)
    assert text.level == "error" and "holds text where numbers or times belong" in text.message


def test_a_json_report_is_read_and_a_corrupt_one_named(tmp_path):
    path = tmp_path / "forward_drift.json"
    write_versioned(path, lambda file: file.write_text(json.dumps({"features": []})))
    assert read_stored_json(path, "forward drift report") == {"features": [], "_version": VERSION}
    (path / VERSION / path.name).write_text("{truncated")
    problem = read_stored_json(path, "forward drift report")
    assert problem.level == "error" and problem.message.startswith(f"the forward drift report {path / VERSION}")
    (path / VERSION / path.name).write_text("[1, 2]")
    assert "holds list, not a JSON object" in read_stored_json(path, "forward drift report").message
    assert read_stored_json(tmp_path / "none.json", "forward report").level == "info"


def test_the_alerts_are_read_and_a_file_that_is_not_alerts_is_reported_as_the_channel_words_it(tmp_path):
    path = tmp_path / "alerts.jsonl"
    assert read_alerts(path) == []
    JsonLinesChannel(path).send(Alert("drawdown", Level.WARNING, "deep", 0.12, 0.1, "2024-01-02T00:00:00"))
    assert [alert["rule"] for alert in read_alerts(path)] == ["drawdown"]
    with open(path, "a") as file:
        file.write('{"rule": "drift"}\n')
    problem = read_alerts(path)
    assert problem.level == "error" and f"{path}: line 2 is not an alert in JSON" in problem.message


def test_buy_and_hold_prices_are_found_by_symbol_or_named_as_missing(tmp_path):
    prices = random_walk_prices(50, seed=2)
    prices.to_csv(tmp_path / f"{SYMBOL}.csv")
    close = read_prices_for(tmp_path, SYMBOL)
    assert close.index.equals(prices.index) and close.to_numpy() == pytest.approx(prices["close"].to_numpy())
    assert read_prices_for(tmp_path / f"{SYMBOL}.csv", "any").equals(close)  # a file is taken as given
    missing = read_prices_for(tmp_path, "ZZZ")
    assert missing.level == "info" and f"no ZZZ.csv or ZZZ.parquet in {tmp_path}" in missing.message
    (tmp_path / "BAD.csv").write_text("")
    assert "price file is empty" in read_prices_for(tmp_path, "BAD").message


def test_a_missing_mlflow_store_is_reported_and_not_created(tmp_path):
    store = tmp_path / "mlflow.db"
    problem = read_champions(f"sqlite:///{store}", [MODEL], "champion")
    assert problem == SourceProblem("info", f"no MLflow store at {store} yet: nothing is registered")
    assert not store.exists()


def test_the_champion_and_its_gates_are_read_as_registration_and_promotion_tag_them(tmp_path):
    uri = empty_store(tmp_path / "mlflow.db")
    [unregistered] = read_champions(uri, [MODEL], "champion")
    assert unregistered.version is None and "no version of trading_rl_sac_icm carries @champion" in unregistered.note
    register_champion(uri)
    [champion] = read_champions(uri, [MODEL], "champion")
    assert champion == Champion(
        MODEL,
        "champion",
        version=1,
        run_id=champion.run_id,
        gates=GATES,
        promoted_by="lead",
        promoted_at=VERSION,
        save_version=VERSION,
    )
    [other_alias] = read_champions(uri, [MODEL], "challenger")
    assert other_alias.version is None


def test_the_sources_read_back_their_own_arguments_and_refuse_bad_ones():
    sources = DashboardSources(
        record=Path("r.parquet"), registered_models=("a", "b"), refresh_s=0.25, tracking_uri="sqlite:///x.db"
    )
    assert DashboardSources.from_argv(sources.to_argv()) == sources
    assert DashboardSources.from_argv([]) == DashboardSources()
    assert DashboardSources(record="text/path.parquet").record == Path("text/path.parquet")
    with pytest.raises(ValueError, match=r"unknown \['--refresh', 'soon'\]; the options are --record, --report"):
        DashboardSources.from_argv(["--refresh", "soon"])
    with pytest.raises(ValueError, match="argument --refresh-s: invalid float value: 'soon'"):
        DashboardSources.from_argv(["--refresh-s", "soon"])
    with pytest.raises(ValueError, match="'refresh_s' must be > 0 seconds, got 0"):
        replace(sources, refresh_s=0)
    with pytest.raises(ValueError, match="'registered_models' must name models"):
        DashboardSources(registered_models="trading_rl_sac_icm")
    with pytest.raises(ValueError, match="'hold_threshold' must be in"):
        DashboardSources(hold_threshold=0.7)

"""feature_extraction end to end: a Kedro session on a project copy, and bad raw files at node level."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers.kedro_project import bootstrap
from helpers.mlflow_store import copy_without_runs

from trading_rl.data import PriceValidationError, load_prices
from trading_rl.features import FeatureParams, compute_features, max_lookback
from trading_rl.features import garch as garch_module
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.integration.datasets import RawPriceFilesDataset
from trading_rl.phases.feature_extraction import (
    define_splits,
    fit_scalers,
    load_and_validate_prices,
    report_price_quality,
)
from trading_rl.pipeline_registry import register_pipelines


def _latest(project: Path, relative: str) -> Path:
    versions = sorted((project / relative).iterdir())
    assert versions, f"no version of {relative}"
    return versions[-1] / Path(relative).name


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_registry_has_foundation_pipelines():

    bootstrap()
    pipelines = register_pipelines()
    assert {"feature_extraction", "env_construction", "__default__"} <= set(pipelines)
    default_nodes = {n.name for n in pipelines["__default__"].nodes}
    assert {
        "feature_extraction.load_and_validate_prices",
        "env_construction.build_env_spec",
        "env_construction.check_env",
    } <= default_nodes


def test_session_writes_versioned_causal_outputs(foundation_project):
    features = pd.read_parquet(_latest(foundation_project, "data/04_feature/features.parquet"))
    scaled = pd.read_parquet(_latest(foundation_project, "data/05_model_input/scaled_features.parquet"))
    splits = yaml.safe_load(_latest(foundation_project, "data/05_model_input/splits.json").read_text())
    assert set(features["symbol"]) == {"sp500", "nasdaq"}
    assert features.shape[1] - 1 >= 20
    assert np.isfinite(scaled.drop(columns="symbol").to_numpy()).all()
    assert splits["sp500"]["gap_bars"] == max_lookback(FeatureParams())
    train_end = pd.Timestamp(splits["sp500"]["train"]["end"])
    validation_start = pd.Timestamp(splits["sp500"]["validation"]["start"])
    prices = load_prices("sp500")
    bars_between = ((prices.index > train_end) & (prices.index < validation_start)).sum()
    assert bars_between == max_lookback(FeatureParams())
    feature_params = yaml.safe_load(_latest(foundation_project, "data/06_models/feature_params.json").read_text())
    garch = feature_params["sp500"]["garch"]["params"]
    assert 0 < garch["alpha"] + garch["beta"] < 1  # fitted, stationary
    report = yaml.safe_load(_latest(foundation_project, "data/08_reporting/env_check_report.json").read_text())
    assert report["passed"] is True
    quality = yaml.safe_load(_latest(foundation_project, "data/08_reporting/price_quality_report.json").read_text())
    stale = quality["sp500"]["stale_opens"]["by_split"]
    assert (stale["train"]["count"], stale["validation"]["count"], stale["test"]["count"]) == (1936, 16, 0)
    assert quality["nasdaq"]["stale_opens"]["count"] == 8


def test_user_file_stale_opens_reported_per_split_and_left_out_of_the_scaler(tmp_path):
    folder = tmp_path / "prices"
    folder.mkdir()
    user = load_prices("nasdaq").iloc[-300:].rename(columns=str.title)  # 2017-2018: no stale open
    stale_bars = [100, 101, 102, 215, 290]  # train 0-149, validation 210-224, test 285-299
    user.iloc[stale_bars, user.columns.get_loc("Open")] = user["Close"].iloc[[b - 1 for b in stale_bars]].to_numpy()
    user["High"] = user[["Open", "High"]].max(axis=1)
    user["Low"] = user[["Open", "Low"]].min(axis=1)
    _write(folder / "USER.csv", user)
    params = FeatureExtractionParams.from_mapping(
        {
            "symbols": [{"name": "USER", "source": "file"}],
            "splits": {"train_fraction": 0.5, "validation_fraction": 0.25},
            "features": {"garch": None},
        },
        "feature_extraction",
    )
    prices = load_and_validate_prices(RawPriceFilesDataset(str(folder)).load(), params)
    splits = define_splits(prices, params)
    stale = report_price_quality(prices, splits, params)["USER"]["stale_opens"]
    assert stale["count"] == len(stale_bars)
    assert stale["longest_run"]["bars"] == 3
    assert stale["longest_run"]["start"] == user.index[100].isoformat()
    assert [stale["by_split"][name]["count"] for name in ("train", "validation", "test")] == [3, 1, 1]

    features = compute_features(prices.drop(columns="symbol"), FeatureParams(garch=None)).iloc[
        max_lookback(FeatureParams()) :
    ]
    assert (features["co_return"].loc[user.index[stale_bars]] == 0.0).all()
    scaler = fit_scalers(features.assign(symbol="USER"), prices, splits, params)["USER"]
    train_rows = features.loc[: splits["USER"]["train"]["end"]]
    real_moves = train_rows["co_return"].drop(index=user.index[stale_bars[:3]])
    assert scaler["center"]["co_return"] == pytest.approx(real_moves.median())


def _write(path: Path, frame: pd.DataFrame) -> Path:
    frame.to_csv(path, index_label="Date")
    return path


def _good_frame(n: int = 300) -> pd.DataFrame:
    return load_prices("sp500").iloc[:n].rename(columns=str.title)


def _bad_files(folder: Path) -> dict[str, tuple[Path, str]]:
    """case -> (file, text the error must contain)."""
    cases: dict[str, tuple[Path, str]] = {}
    frame = _good_frame()
    nan = frame.copy()
    nan.iloc[10, nan.columns.get_loc("Close")] = np.nan
    cases["nan_price"] = (_write(folder / "NANP.csv", nan), "close")
    negative = frame.copy()
    negative.iloc[12, negative.columns.get_loc("Open")] = -5.0
    cases["negative_price"] = (_write(folder / "NEG.csv", negative), "open")
    high_low = frame.copy()
    high_low.iloc[20, high_low.columns.get_loc("High")] = high_low.iloc[20]["Low"] - 1
    cases["high_below_low"] = (_write(folder / "HILO.csv", high_low), "high")
    duplicate = pd.concat([frame.iloc[:50], frame.iloc[49:]])
    cases["duplicate_timestamp"] = (_write(folder / "DUP.csv", duplicate), "timestamp")
    unsorted = frame.iloc[np.r_[0:30, 31, 30, 32 : len(frame)]]
    cases["unsorted"] = (_write(folder / "UNSORTED.csv", unsorted), "timestamp")
    cases["missing_column"] = (_write(folder / "NOVOL.csv", frame.drop(columns="Volume")), "volume")
    text = frame.astype({"Close": object})
    text.iloc[5, text.columns.get_loc("Close")] = "abc"
    cases["non_numeric"] = (_write(folder / "TEXT.csv", text), "close")
    empty = folder / "EMPTY.csv"
    empty.write_bytes(b"")
    cases["empty_file"] = (empty, "EMPTY")
    cases["three_rows"] = (_write(folder / "SHORT.csv", frame.iloc[:3]), "SHORT")
    return cases


@pytest.mark.parametrize(
    "case",
    [
        "nan_price",
        "negative_price",
        "high_below_low",
        "duplicate_timestamp",
        "unsorted",
        "missing_column",
        "non_numeric",
        "empty_file",
        "three_rows",
    ],
)
def test_bad_raw_file_stops_with_named_error_and_file_untouched(tmp_path, case):
    folder = tmp_path / "prices"
    folder.mkdir()
    cases = _bad_files(folder)
    path, expected = cases[case]
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    symbol = path.stem
    with pytest.raises(ValueError) as error:
        load_and_validate_prices(
            RawPriceFilesDataset(str(folder)).load(),
            FeatureExtractionParams.from_mapping(
                {
                    "symbols": [{"name": "sp500", "source": "packaged"}, {"name": symbol, "source": "file"}],
                    "splits": {"train_fraction": 0.6, "validation_fraction": 0.2},
                },
                "feature_extraction",
            ),
        )
    message = str(error.value)
    assert symbol in message
    assert expected.lower() in message.lower()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


@pytest.mark.slow
def test_bad_input_session_writes_nothing(tmp_path, foundation_project, kedro_run):
    """A failing run on a project with earlier outputs (the foundation's ci run) leaves every saved
    file as it was."""
    project = copy_without_runs(foundation_project, tmp_path / "project")
    cwd = os.getcwd()
    os.chdir(project)
    try:
        before = _snapshot(project / "data")
        bad = _good_frame()
        bad.iloc[40, bad.columns.get_loc("Low")] = bad.iloc[40]["High"] * 1.1
        _write(project / "data/01_raw/prices/BAD.csv", bad)
        raw_before = hashlib.sha256((project / "data/01_raw/prices/BAD.csv").read_bytes()).hexdigest()
        (project / "conf/local/parameters_feature_extraction.yml").write_text(
            "feature_extraction:\n  symbols:\n    - {name: BAD, source: file}\n"
        )
        (project / "conf/local/parameters_env_construction.yml").write_text("env_construction:\n  symbol: BAD\n")
        with pytest.raises(PriceValidationError, match="BAD"):
            kedro_run(project, ["feature_extraction", "env_construction"], env="local")
        after = _snapshot(project / "data")
        after.pop("01_raw/prices/BAD.csv")
        assert after == before
        assert hashlib.sha256((project / "data/01_raw/prices/BAD.csv").read_bytes()).hexdigest() == raw_before
    finally:
        os.chdir(cwd)


REGIME_VOL_SYMBOL = (
    "{name: RV, source: synthetic, market: "
    "{family: regime_vol, strength: 0.8, regime_persistence: 0.995, n_bars: 1500, seed: 0}}"
)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.slow
def test_a_regime_vol_market_runs_through_feature_extraction_with_the_garch_fallback(
    tmp_path, project_copy, kedro_run, monkeypatch
):
    """Base configuration, one regime-switching-volatility symbol: its GARCH fit is integrated, the run
    warns (symbol, parameters, fallback) instead of refusing, and stores the fallback's parameters."""
    project = project_copy(tmp_path / "project")
    (project / "conf/local/parameters_feature_extraction.yml").write_text(
        f"feature_extraction:\n  symbols:\n    - {REGIME_VOL_SYMBOL}\n"
        '  splits: {train_end: "2003-06-13", validation_end: "2004-08-09"}\n'
    )
    (project / "conf/local/parameters_env_construction.yml").write_text("env_construction:\n  symbol: RV\n")
    # The session's logging config clears the handlers of the module's registered logger, so the
    # module logs to an unregistered one with the same name that keeps this test's handler.
    records, probe = _Records(), logging.Logger("trading_rl.features.garch")
    probe.addHandler(records)
    monkeypatch.setattr(garch_module, "logger", probe)
    kedro_run(project, ["feature_extraction", "env_construction"], env="local")
    (message,) = records.messages
    assert "symbol 'RV'" in message and "alpha + beta = 1.000000000" in message and "EWMA fallback" in message
    feature_params = yaml.safe_load(_latest(project, "data/06_models/feature_params.json").read_text())
    garch = feature_params["RV"]["garch"]["params"]
    assert garch["omega"] == 0.0 and garch["start_variance"] > 0
    assert garch["alpha"] + garch["beta"] == pytest.approx(1.0, abs=1e-15)
    features = pd.read_parquet(_latest(project, "data/04_feature/features.parquet"))
    assert features["garch_vol"].notna().all() and (features["garch_vol"] > 0).all()
    report = yaml.safe_load(_latest(project, "data/08_reporting/env_check_report.json").read_text())
    assert report["passed"] is True

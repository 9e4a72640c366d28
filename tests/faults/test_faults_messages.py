"""Fault suite, messages that named the wrong cause or stopped too much: a window-size mismatch alone
("same feature columns in another order"), a ``.csv`` + ``.parquet`` pair of one symbol (stopped every
file-symbol run), ``train_end`` after ``validation_end`` (refused only after ``prices`` was written)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from helpers.synthetic_prices import tiny_env_spec
from helpers.wired import wired_functions
from kedro.io import DatasetError

from trading_rl.config import ConfigError
from trading_rl.envs.compatibility import ModelCompatibilityError, check_model_fits_spec, model_signature
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.integration.datasets import RawPriceFilesDataset
from trading_rl.pipelines.feature_extraction.pipeline import create_pipeline as feature_extraction


@pytest.fixture(scope="module")
def spec():
    return tiny_env_spec()


def test_a_window_size_mismatch_alone_names_the_windows_not_the_column_order(spec):
    trained_on = replace(spec, config=replace(spec.config, window_size=5))
    model = SimpleNamespace(
        trading_rl_metadata=model_signature(trained_on),
        observation_space=gym.spaces.Box(-1, 1, (trained_on.layout.dim,)),
    )
    with pytest.raises(ModelCompatibilityError) as raised:
        check_model_fits_spec(model, spec, model_dataset="sac_icm_model", pipeline="export")
    message = str(raised.value)
    assert "window 5 vs 3; same feature columns in the same order" in message, message
    assert "another order" not in message


def _prices_csv(path) -> None:
    index = pd.bdate_range("2020-01-01", periods=30)
    close = np.linspace(100.0, 110.0, 30)
    frame = pd.DataFrame({"Open": close, "High": close + 1, "Low": close - 1, "Close": close, "Volume": 1.0})
    frame.set_axis(pd.Index(index, name="Date")).to_csv(path)


def test_a_csv_and_parquet_pair_stops_only_its_own_symbol(tmp_path):
    _prices_csv(tmp_path / "GOOD.csv")
    _prices_csv(tmp_path / "TWIN.csv")
    (tmp_path / "TWIN.parquet").write_bytes(b"also TWIN")
    loaders = RawPriceFilesDataset(str(tmp_path)).load()
    assert len(loaders["GOOD"]()) == 30
    with pytest.raises(DatasetError) as raised:
        loaders["TWIN"]()
    message = str(raised.value)
    assert "symbol 'TWIN' has 2 raw files" in message and "TWIN.csv" in message and "TWIN.parquet" in message
    assert "Fix: keep one" in message


def test_split_dates_out_of_order_are_refused_before_any_file_is_read():
    def never_read():
        raise AssertionError("the price file was read before the split parameters were checked")

    params = {
        "symbols": [{"name": "GOOD", "source": "file"}],
        "splits": {"train_end": "2001-01-01", "validation_end": "2000-06-30"},
    }
    with pytest.raises(ConfigError) as raised:
        wired_functions(feature_extraction())["load_and_validate_prices"]({"GOOD": never_read}, params)
    message = str(raised.value)
    for expected in (
        "parameter 'feature_extraction.splits'",
        "train_end='2001-01-01' must be before validation_end='2000-06-30'",
        "Nothing was read or written",
        "Fix: set 'feature_extraction.splits' in conf/<env>/parameters_feature_extraction.yml",
    ):
        assert expected in message, (expected, message)


def test_split_fractions_that_leave_no_test_split_are_refused_naming_the_parameter():
    with pytest.raises(ConfigError, match=r"'feature_extraction.splits': train_fraction \+ validation_fraction"):
        FeatureExtractionParams.from_mapping(
            {"symbols": ["GOOD"], "splits": {"train_fraction": 0.8, "validation_fraction": 0.2}}
        )


def test_every_symbol_input_of_a_phase_is_checked(spec):
    """The per-phase check (PhaseInputHooks) on each kind of input, without a Kedro session."""
    from trading_rl.integration.phase_inputs import check_phase_inputs

    check_phase_inputs({"env_spec": spec, "feature_params": {"AAA": {}}, "scalers": {"AAA": {}}}, "AAA", "export")
    returns = pd.DataFrame({"symbol": ["FWD"], "return": [0.0]})
    deployed = SimpleNamespace(trading_rl_metadata={"symbol": "AAA", "save_version": "V"})
    check_phase_inputs({"deployed_model": deployed}, "AAA", "forward")
    check_phase_inputs({"deployed_model": None}, "FWD", "forward")  # nothing promoted: forward says "not checked"
    cases = [
        ({"env_spec": spec}, "options_her", "dataset 'env_spec' is for symbol 'AAA'"),
        ({"env_spec": spec}, "reward_shaper", "dataset 'env_spec' is for symbol 'AAA'"),
        ({"deployed_model": deployed}, "forward", "dataset 'deployed_model' (version V) trades symbol 'AAA'"),
        ({"env_spec": spec, "scalers": {"FWD": {}}}, "export", "dataset 'scalers' holds symbols ['FWD']"),
        ({"walk_forward_returns": returns}, "regime_validation", "dataset 'walk_forward_returns' holds symbols"),
        ({"prices": returns, "params:env_construction": {}}, "walk_forward", "dataset 'prices' holds symbols"),
    ]
    for inputs, pipeline, named in cases:
        symbol = "FWD" if ("env_spec" in inputs and "scalers" not in inputs) or "deployed_model" in inputs else "AAA"
        with pytest.raises(ModelCompatibilityError) as raised:
            check_phase_inputs(inputs, symbol, pipeline)
        assert named in str(raised.value) and f"--pipelines {pipeline}" in str(raised.value), str(raised.value)
    check_phase_inputs({"prices": returns}, "AAA", "feature_extraction")  # prices alone: not a phase's symbol
    check_phase_inputs({"walk_forward_returns": returns.iloc[:0]}, "AAA", "validation")  # no returns yet


@pytest.mark.parametrize(
    "phase",
    [
        "sac_icm",
        "options_her",
        "reward_shaper",
        "regime_validation",
        "export",
        "walk_forward",
        "final_evaluation",
        "forward",
    ],
)
def test_the_first_node_of_each_phase_loads_an_input_the_symbol_check_reads(phase):
    """PhaseInputHooks checks a node's loaded inputs: the phase is refused before anything is written
    only if the node it runs first already loads what names the symbol."""
    from helpers.kedro_project import bootstrap

    from trading_rl.pipeline_registry import register_pipelines

    bootstrap()
    first = register_pipelines()[phase].nodes[0]
    inputs = set(first.inputs)
    names_the_symbol = inputs & {"env_spec", "walk_forward_returns", "deployed_model"}
    prices_by_env_settings = {"prices", "params:env_construction"} <= inputs
    assert names_the_symbol or prices_by_env_settings, (first.name, sorted(inputs))

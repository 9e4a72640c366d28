"""Many symbols: namespaces wired from the YAML, dataset factories, the frozen shared encoder inside
each agent, and per-symbol training on Ray giving the sequential numbers."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pandas as pd
import pytest
import torch
import yaml
from helpers.mlflow_store import empty_store
from helpers.synthetic_prices import random_walk_prices
from helpers.tiny import tiny_agent
from kedro.io import DataCatalog
from kedro.runner import SequentialRunner, ThreadRunner

from trading_rl.algorithms.sac_icm.shared_encoder import FrozenEncoderExtractor
from trading_rl.features import FeatureParams, apply_scaler, compute_features, fit_scaler, make_splits
from trading_rl.pipelines.multi_symbol import create_pipeline
from trading_rl.pipelines.multi_symbol.pipeline import ENCODER, WIRING_FILE

PROJECT_ROOT = Path(__file__).resolve().parents[3]
FEATURES = FeatureParams(garch=None)
ENV = {"symbol": "AAA", "env": {"window_size": 5, "episode_length": 80}, "periods_per_year": 252}
SAC_ICM = {
    "device": "cpu",
    "evaluation_split": "validation",
    "resume_dir": "unused",
    "progress_bar": False,
    "agent": tiny_agent(
        sac={"buffer_size": 500},
        policy={"net_arch": [16]},
        icm={"hidden_dim": 8},
        training={"total_timesteps": 80, "eval_freq": 40, "resume_every": 40},
    ),
}
ENCODER_PARAMS = {"latent_dim": 6, "hidden_dim": 16, "steps_per_symbol": 120, "epochs": 5, "batch_size": 32}


def write_wiring(root: Path, symbols, enabled: bool = True) -> Path:
    path = root / WIRING_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump({"multi_symbol": {"symbols": symbols, "shared_encoder": {**ENCODER_PARAMS, "enabled": enabled}}})
    )
    return root


def market(symbol: str, seed: int, n_bars: int = 700) -> pd.DataFrame:
    return random_walk_prices(n_bars, seed).assign(symbol=symbol)


@pytest.fixture(scope="module")
def shared_inputs():
    """The feature_extraction outputs for two symbols, as the pipeline consumes them."""
    prices, scaled, splits = [], [], {}
    for seed, symbol in enumerate(["AAA", "BBB"]):
        frame = market(symbol, seed)
        features = compute_features(frame.drop(columns="symbol"), FEATURES).dropna()
        splits[symbol] = make_splits(
            features.index, {"train_fraction": 0.6, "validation_fraction": 0.2, "gap_bars": 60}
        )
        scaler = fit_scaler(features.loc[: splits[symbol]["train"]["end"]])
        prices.append(frame)
        scaled.append(apply_scaler(features, scaler).assign(symbol=symbol))
    return {"prices": pd.concat(prices), "scaled_features": pd.concat(scaled), "splits": splits}


def test_namespaces_come_from_the_yaml_and_a_new_symbol_is_a_config_change(tmp_path):
    pipeline = create_pipeline(write_wiring(tmp_path, ["AAA", "BBB"]))
    assert {node.name for node in pipeline.nodes} == {
        "fit_shared_encoder",
        "AAA.build_symbol_env_spec",
        "AAA.train_symbol_agent",
        "BBB.build_symbol_env_spec",
        "BBB.train_symbol_agent",
    }
    assert {"AAA.sac_icm_model", "BBB.sac_icm_best_model", ENCODER} <= pipeline.all_outputs()
    assert {"prices", "scaled_features", "splits", "params:sac_icm", "params:runtime"} <= pipeline.inputs()

    more = create_pipeline(write_wiring(tmp_path, ["AAA", "BBB", "CCC"], enabled=False))
    assert "CCC.train_symbol_agent" in {node.name for node in more.nodes}
    assert ENCODER not in more.all_outputs() | more.inputs()  # no encoder: no encoder node or input
    assert create_pipeline(PROJECT_ROOT).nodes  # the project's own file wires


def test_missing_or_bad_wiring_fails_with_the_file_or_key_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="parameters_multi_symbol.yml"):
        create_pipeline(tmp_path)
    with pytest.raises(ValueError, match=r"multi_symbol\.symbols"):
        create_pipeline(write_wiring(tmp_path, ["BRK.B"]))
    with pytest.raises(ValueError, match=r"multi_symbol\.symbols"):
        create_pipeline(write_wiring(tmp_path, ["AAA", "AAA"]))


def test_dataset_factories_resolve_per_symbol():
    config = yaml.safe_load((PROJECT_ROOT / "conf/base/catalog_multi_symbol.yml").read_text())
    catalog = DataCatalog.from_config(config)
    for symbol in ("sp500", "XYZ_1"):
        described = catalog.get(f"{symbol}.sac_icm_model")._describe()
        assert f"multi_symbol/{symbol}/sac_icm_model.zip" in str(described["filepath"])
    assert "{symbol}.env_spec" in catalog.config_resolver.list_patterns()


def parameters(tmp_path: Path, engine: str = "sequential") -> dict:
    return {
        "params:env_construction": ENV,
        "params:sac_icm": {**SAC_ICM, "resume_dir": str(tmp_path / "resume")},
        "params:seed": 5,
        "params:runtime": {"engine": engine},
        "params:multi_symbol": {"symbols": ["AAA", "BBB"], "shared_encoder": ENCODER_PARAMS},
        "run_metadata": {"seed": 5},
    }


@pytest.mark.slow
def test_pipeline_trains_one_agent_per_symbol_on_the_frozen_shared_encoder(tmp_path, shared_inputs):
    """Through the project's catalog entries (files under tmp_path): the SB3 zip carries the frozen
    encoder, so a reloaded agent still holds the fitted weights."""
    config = yaml.safe_load((PROJECT_ROOT / "conf/base/catalog_multi_symbol.yml").read_text())
    for entry in config.values():
        entry["filepath"] = str(tmp_path / entry["filepath"])
    catalog = DataCatalog.from_config(config)
    for name, value in {**shared_inputs, **parameters(tmp_path)}.items():
        catalog[name] = value
    mlflow.set_tracking_uri(empty_store(tmp_path / "mlflow.db"))
    mlflow.set_experiment("multi_symbol")
    try:
        with mlflow.start_run() as run:
            SequentialRunner().run(create_pipeline(write_wiring(tmp_path, ["AAA", "BBB"])), catalog)
        client = mlflow.MlflowClient()
        logged = {
            symbol: client.get_metric_history(run.info.run_id, f"multi_symbol/{symbol}/eval/total_return")
            for symbol in ("AAA", "BBB")
        }
    finally:
        mlflow.set_tracking_uri("")
    # each symbol's history, returned by its task, reached MLflow once with the evaluations' steps
    for symbol, points in logged.items():
        history = catalog.load(f"{symbol}.sac_icm_training_history")
        assert [(p.step, p.value) for p in points] == [(e["timestep"], e["eval/total_return"]) for e in history]

    encoder = catalog.load(ENCODER)
    report = catalog.load("multi_symbol_encoder_report")
    assert report["n_observations"] == 2 * ENCODER_PARAMS["steps_per_symbol"]
    assert report["reconstruction_loss"][-1] < report["reconstruction_loss"][0]
    observations = torch.randn(4, encoder.config["obs_dim"])
    for symbol in ("AAA", "BBB"):
        model = catalog.load(f"{symbol}.sac_icm_model")
        assert model.trading_rl_metadata["symbol"] == symbol and model.trading_rl_metadata["shared_encoder"]
        assert model.num_timesteps == SAC_ICM["agent"]["training"]["total_timesteps"]
        for net in (model.actor, model.critic, model.critic_target):
            extractor = net.features_extractor
            assert isinstance(extractor, FrozenEncoderExtractor)
            # Training moved the heads, never the encoder: still the fitted weights.
            for name, value in encoder.state_dict().items():
                torch.testing.assert_close(extractor.encoder.state_dict()[name], value, rtol=0, atol=0)
            torch.testing.assert_close(extractor(observations), encoder(observations), rtol=0, atol=0)
            assert not list(extractor.parameters())  # nothing an optimiser could move
    assert catalog.load("AAA.env_spec").symbol == "AAA"


@pytest.mark.slow
def test_symbols_train_concurrently_under_thread_runner_with_the_sequential_results(
    tmp_path, shared_inputs, ray_session
):
    """``--runner ThreadRunner --params runtime.engine=ray``: both symbols' trainings are Ray tasks
    at once (one Ray session shared by the threads), and the models, best models and training
    histories (evaluations included) equal the sequential run's."""
    config = yaml.safe_load((PROJECT_ROOT / "conf/base/catalog_multi_symbol.yml").read_text())
    pipeline = create_pipeline(write_wiring(tmp_path, ["AAA", "BBB"]))  # the frozen encoder travels too
    models = {}
    for runner, engine in ((SequentialRunner(), "sequential"), (ThreadRunner(max_workers=2), "ray")):
        entries = {
            name: {**entry, "filepath": str(tmp_path / engine / entry["filepath"])} for name, entry in config.items()
        }
        catalog = DataCatalog.from_config(entries)
        for name, value in {**shared_inputs, **parameters(tmp_path / engine, engine)}.items():
            catalog[name] = value
        runner.run(pipeline, catalog)
        models[engine] = {
            (symbol, kind): catalog.load(f"{symbol}.{kind}")
            for symbol in ("AAA", "BBB")
            for kind in ("sac_icm_model", "sac_icm_best_model", "sac_icm_training_history")
        }
    for (symbol, kind), expected in models["sequential"].items():
        actual = models["ray"][symbol, kind]
        if kind == "sac_icm_training_history":  # NaN where a metric is undefined, hence the frames
            pd.testing.assert_frame_equal(pd.DataFrame(actual), pd.DataFrame(expected), check_exact=True)
            continue
        for name, value in actual.policy.state_dict().items():
            torch.testing.assert_close(value, expected.policy.state_dict()[name], rtol=0, atol=0)

"""The served model of the tiny export setup (``helpers.export_setup``), saved as an MLflow model
folder, and MLflow's own scoring server app on it behind a real HTTP server in this process
(``helpers.served_model.Server``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from helpers.export_setup import build
from helpers.served_model import Server

from trading_rl.export import export_actor
from trading_rl.monitoring.alerting import AlertingParams
from trading_rl.serving import ServingParams, served_package

SAFEGUARDS = {"max_trades_per_day": 10, "max_position_pct": 0.15, "daily_loss_limit": 0.02, "max_drawdown": 0.10}


def inference_config(setup) -> dict:
    return {
        "symbol": "sp500",
        "feature_params": setup.feature_params.to_dict(),
        "scaler": setup.scaler,
        "env_config": setup.spec.config_data(),
        "feature_columns": list(setup.spec.feature_columns),
        "safeguards": SAFEGUARDS,
    }


@pytest.fixture(scope="session")
def serving_setup():
    """The tiny agent, its ONNX actor and its served package (its example: the env's first decision
    of the validation split)."""
    setup = build()
    onnx = export_actor(setup.model)
    first_decision = setup.spec.prices["validation"].index[setup.spec.config.window_size - 1]
    package = served_package(
        onnx,
        inference_config(setup),
        setup.prices,
        first_decision,
        "2030-01-01T00.00.00.000Z",
        "sac_icm_model",
        ServingParams(),
        AlertingParams(),
    )
    return SimpleNamespace(**vars(setup), onnx=onnx, package=package)


@pytest.fixture(scope="session")
def served_model_dir(serving_setup, tmp_path_factory):
    """The served model saved as an MLflow model folder (what `mlflow models serve -m` takes)."""
    from trading_rl.integration.mlflow_tracking import save_served_model

    path = tmp_path_factory.mktemp("served") / "model"
    save_served_model(serving_setup.package, path)
    return path


@pytest.fixture
def server(served_model_dir, tmp_path):
    """A fresh server (fresh state) on the served model; its decision log in ``tmp_path``."""
    started = Server(served_model_dir, tmp_path / "decisions.jsonl")
    yield started
    started.close()

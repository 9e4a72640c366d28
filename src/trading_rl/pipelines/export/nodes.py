"""Thin nodes around ``trading_rl.export``."""

from __future__ import annotations

from typing import Any

import pandas as pd

from trading_rl.data import by_symbol
from trading_rl.envs import EnvSpec
from trading_rl.envs.compatibility import check_model_fits_spec, model_metadata
from trading_rl.export.inference import BAR_COLUMNS
from trading_rl.export.onnx_export import ExportParams, export_and_verify
from trading_rl.monitoring.alerting import AlertingParams
from trading_rl.serving.package import ServedPackage, ServingParams, served_package


def export_agent(
    model: Any,
    env_spec: EnvSpec,
    feature_params: dict[str, Any],
    scalers: dict[str, Any],
    section: ExportParams,
    seed: int,
    model_dataset: str = "sac_icm_model",
) -> tuple[bytes, dict[str, Any], dict[str, Any]]:
    """ONNX actor, its parity + latency report, and everything ``SignalEngine`` needs besides it.

    A parity failure raises, so no ONNX file that disagrees with the policy is ever saved, and a
    model not trained on ``env_spec`` is refused before anything is exported.
    """
    check_model_fits_spec(model, env_spec, model_dataset=model_dataset, pipeline="export")
    symbol = env_spec.symbol
    parity_env = env_spec.make_env(section.parity.split)
    onnx_bytes, report = export_and_verify(model, parity_env, section, seed=seed)
    report = {
        **report,
        "symbol": symbol,
        "parity_split": section.parity.split,
        "model_metadata": model_metadata(model),
    }
    inference_config = {
        "symbol": symbol,
        "feature_params": feature_params[symbol],
        "scaler": scalers[symbol],
        "env_config": env_spec.config_data(),
        "feature_columns": list(env_spec.feature_columns),
        "safeguards": section.safeguards.to_dict(),
    }
    return onnx_bytes, report, inference_config


def package_served_model(
    model: Any,
    onnx_bytes: bytes,
    inference_config: dict[str, Any],
    env_spec: EnvSpec,
    prices: pd.DataFrame,
    section: ServingParams,
    alerting: AlertingParams,
    run_metadata: dict[str, Any],
    model_dataset: str = "sac_icm_model",
) -> ServedPackage:
    """The served model's package (``serving.served_package``): the exported actor and its inference
    config, the model version (the agent's save version; this run's for an agent without one), the
    symbol's bar spacing, and as example request the env's first decision of the validation split
    (every bar of the symbol's prices up to it, a flat account), so the example's answer is that
    step of the env; its decisions alert by the run's ``alerting`` section."""
    history = by_symbol(prices)[env_spec.symbol][list(BAR_COLUMNS)]
    split = "validation" if "validation" in env_spec.prices else "train"
    decision_bar = env_spec.prices[split].index[env_spec.config.window_size - 1]  # the env's first_tradable_bar
    version = model_metadata(model).get("save_version") or run_metadata["save_version"]
    return served_package(
        onnx_bytes, inference_config, history, decision_bar, str(version), model_dataset, section, alerting
    )

"""Thin nodes around ``trading_rl.export``."""

from __future__ import annotations

from typing import Any

from trading_rl.envs import EnvSpec
from trading_rl.envs.compatibility import check_model_fits_spec, model_metadata
from trading_rl.export.onnx_export import ExportParams, export_and_verify


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

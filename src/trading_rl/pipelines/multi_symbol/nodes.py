"""Thin nodes around ``trading_rl.algorithms.sac_icm.shared_encoder`` and ``trading_rl.phases.multi_symbol``; ``symbol``
and ``wired_symbols`` are bound when the pipeline is built (see ``pipeline.py``)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pandas as pd

from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
from trading_rl.algorithms.sac_icm.shared_encoder import SharedEncoder, collect_observations, fit_shared_encoder
from trading_rl.envs import EnvConstructionParams, EnvSpec, symbol_env_spec
from trading_rl.envs.compatibility import model_signature, set_model_metadata
from trading_rl.phases.multi_symbol import MultiSymbolParams, train_symbol_agent
from trading_rl.phases.walk_forward.population import make_executor
from trading_rl.pipelines.tracking import log_history
from trading_rl.runtime import RuntimeParams
from trading_rl.training.params import SacIcmParams


def _check_wiring(config: MultiSymbolParams, wired_symbols: list[str]) -> MultiSymbolParams:
    if config.symbols != wired_symbols:
        raise ValueError(
            f"parameter 'multi_symbol.symbols' resolved to {config.symbols}, but the pipeline was wired for "
            f"{wired_symbols} from conf/base/parameters_multi_symbol.yml when the registry was built; change the "
            "symbols there (run-time overrides and other envs cannot add or remove namespaces)"
        )
    return config


def build_symbol_spec(
    prices: pd.DataFrame,
    scaled_features: pd.DataFrame,
    splits: dict[str, Any],
    env_construction: EnvConstructionParams,
    params: MultiSymbolParams,
    symbol: str,
    wired_symbols: list[str],
) -> EnvSpec:
    """The ``env_construction`` spec of ``symbol`` (same env settings as the single-symbol phase)."""
    _check_wiring(params, wired_symbols)
    if symbol not in set(prices["symbol"]):
        raise ValueError(
            f"parameter 'multi_symbol.symbols' lists {symbol!r}, which is not among the extracted symbols "
            f"{sorted(set(prices['symbol']))}: add it to feature_extraction.symbols"
        )
    return symbol_env_spec(prices, scaled_features, splits, dataclasses.replace(env_construction, symbol=symbol))


def fit_encoder(
    prices: pd.DataFrame,
    scaled_features: pd.DataFrame,
    splits: dict[str, Any],
    env_construction: EnvConstructionParams,
    params: MultiSymbolParams,
    seed: int,
    wired_symbols: list[str],
) -> tuple[SharedEncoder, dict[str, Any]]:
    """The frozen shared encoder, fitted on every symbol's training split, and its training report."""
    config = _check_wiring(params, wired_symbols).shared_encoder
    specs = [
        build_symbol_spec(prices, scaled_features, splits, env_construction, params, symbol, wired_symbols)
        for symbol in wired_symbols
    ]
    observations = collect_observations(specs, config.steps_per_symbol, seed)
    encoder, losses = fit_shared_encoder(observations, config.to_dict(), seed)
    report = {
        "symbols": wired_symbols,
        "n_observations": int(len(observations)),
        "obs_dim": encoder.config["obs_dim"],
        "latent_dim": encoder.config["latent_dim"],
        "reconstruction_loss": losses,
    }
    return encoder, report


def train_symbol(
    env_spec: EnvSpec,
    sac_icm: SacIcmParams,
    seed: int,
    run_metadata: dict[str, Any],
    runtime: RuntimeParams,
    shared_encoder: SharedEncoder | None = None,
) -> tuple[Any, Any, list[dict]]:
    """Train the symbol's agent as one task on the ``runtime.engine`` executor (a Ray task with its
    GPU share under ``ray``); final model, best model and training history. The history reaches
    MLflow (``multi_symbol/<symbol>/<key>`` at each evaluation's timestep) when the task returns:
    a worker process has no MLflow run to stream to (docs/tearsheets.md, "Live training feedback")."""
    work_dir = Path(sac_icm.resume_dir).resolve() / "multi_symbol" / env_spec.symbol
    executor = make_executor(runtime)
    (result,) = executor.map(
        train_symbol_agent,
        [
            {
                "spec": env_spec,
                "sac_icm": sac_icm,
                "seed": seed,
                "work_dir": str(work_dir),
                "encoder": shared_encoder,
            }
        ],
        others_may_compute=True,  # the symbol's training: under OverlapRunner other symbols' nodes go on
    )
    log_history(f"multi_symbol/{env_spec.symbol}", result["history"])
    metadata = {
        **run_metadata,
        **model_signature(env_spec),
        "best_timestep": result["best_timestep"],
        "shared_encoder": shared_encoder is not None,
    }
    models = []
    for key in ("model", "best_model"):
        model = SACWithICM.load(io.BytesIO(result[key]), device="cpu")
        set_model_metadata(model, metadata)
        models.append(model)
    return models[0], models[1], result["history"]

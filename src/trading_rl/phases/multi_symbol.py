"""The multi_symbol phase: its parameters (the symbols and the shared encoder's settings), each symbol's
env spec, the shared encoder (``algorithms.sac_icm.shared_encoder``) fitted on every symbol's training
split, and its task, one symbol's agent trained as the ``sac_icm`` phase trains it, with the shared
encoder as its frozen features extractor when given.

``symbol`` and ``wired_symbols`` are bound when the pipeline is built (``pipelines/multi_symbol/
pipeline.py`` wires one namespace per symbol of conf/base); the functions check at run time that the
resolved ``multi_symbol.symbols`` still matches that wiring.
"""

from __future__ import annotations

import dataclasses
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
from stable_baselines3.common.utils import set_random_seed

from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
from trading_rl.algorithms.sac_icm.shared_encoder import (
    SharedEncoder,
    build_agent_with_encoder,
    collect_observations,
    fit_shared_encoder,
)
from trading_rl.algorithms.saved import sb3_zip_bytes
from trading_rl.config import Section, setting
from trading_rl.envs import EnvConstructionParams, EnvSpec, symbol_env_spec
from trading_rl.envs.compatibility import model_signature, set_model_metadata
from trading_rl.runtime import Executor, RuntimeParams
from trading_rl.training.loop import train_agent
from trading_rl.training.params import SacIcmParams

# A symbol names a Kedro namespace and a folder: no dots, slashes or spaces.
SYMBOL_PATTERN = re.compile(r"^[A-Za-z0-9_]+$")


def _symbols_problem(symbols: list[str]) -> str | None:
    if not symbols or len(set(symbols)) != len(symbols):
        return "a non-empty list of distinct names"
    if not all(SYMBOL_PATTERN.match(symbol) for symbol in symbols):
        return "names of letters, digits and '_' only (a symbol names a Kedro namespace)"
    return None


@dataclass(frozen=True, kw_only=True)
class SharedEncoderParams(Section):
    """``multi_symbol.shared_encoder`` (seeds 001, phase A.2.2): a feature encoder trained once on
    every symbol's training-split observations (``steps_per_symbol`` random-action observations per
    symbol), frozen and injected as each agent's features extractor. ``enabled`` is also read when
    the pipeline registry is built (false drops the encoder node)."""

    RENAMED = {"lr": "learning_rate"}

    enabled: bool = True
    latent_dim: int = setting(32, interval="[1, inf)")
    hidden_dim: int = setting(128, interval="[1, inf)")
    steps_per_symbol: int = setting(2000, interval="[1, inf)")
    epochs: int = setting(30, interval="[1, inf)")
    batch_size: int = setting(256, interval="[1, inf)")
    learning_rate: float = setting(1e-3, interval="(0, inf)")


@dataclass(frozen=True, kw_only=True)
class MultiSymbolParams(Section):
    """The ``multi_symbol`` section; ``symbols`` has no code default (conf/base is its one place)."""

    symbols: list[str] = setting(check=_symbols_problem)
    shared_encoder: SharedEncoderParams = setting(SharedEncoderParams())


def train_symbol_agent(
    spec: EnvSpec,
    sac_icm: SacIcmParams,
    seed: int,
    work_dir: str,
    encoder: SharedEncoder | None = None,
) -> dict[str, Any]:
    """A task: one symbol's agent trained as the ``sac_icm`` phase trains it (same parameters, best
    and final models, resume checkpoint in ``work_dir``), with ``encoder`` as its frozen features
    extractor when given. Returns the two models as SB3 zip bytes, the history and the best step."""
    set_random_seed(seed)
    model = build_agent_with_encoder(spec.make_env("train", seed=seed), sac_icm.agent, seed, sac_icm.device, encoder)
    outcome = train_agent(
        model,
        partial(spec.make_env, sac_icm.evaluation_split),
        sac_icm.agent,
        work_dir=work_dir,
        periods_per_year=spec.periods_per_year,
        phase="multi_symbol",
        symbol=spec.symbol,
        run_parameters={
            "seed": seed,
            "evaluation_split": sac_icm.evaluation_split,
            "env_spec": spec.digest(),
            "shared_encoder": encoder is not None,
        },
    )
    return {
        "model": sb3_zip_bytes(outcome.model),
        "best_model": sb3_zip_bytes(outcome.best_model),
        "history": outcome.history,
        "best_timestep": outcome.best_timestep,
    }


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
    *,
    make_executor: Callable[[RuntimeParams], Executor],
    log_history: Callable[[str, list[dict]], None],
) -> tuple[Any, Any, list[dict]]:
    """Train the symbol's agent as one task on the executor ``make_executor(runtime)`` (the pipeline
    binds the ``runtime.engine`` one: a Ray task with its GPU share under ``ray``); final model, best
    model and training history. The history goes to ``log_history("multi_symbol/<symbol>", history)``
    when the task returns (the pipeline logs it to MLflow at each evaluation's timestep): a worker
    process has no MLflow run to stream to (docs/tearsheets.md, "Live training feedback")."""
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

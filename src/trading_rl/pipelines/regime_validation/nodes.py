"""Thin nodes around ``trading_rl.evaluation.regimes`` and ``plots``."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from trading_rl.envs import EnvSpec
from trading_rl.evaluation import plots
from trading_rl.evaluation.baselines import run_baselines
from trading_rl.evaluation.regimes import label_regimes, regime_metrics
from trading_rl.evaluation.rollout import policy_from_sb3, run_episode
from trading_rl.pipelines.feature_extraction.nodes import by_symbol


def label_market_regimes(prices: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """Long frame (timestamp index, ``symbol``, ``regime``) of causal labels for every symbol."""
    return pd.concat(
        [
            label_regimes(frame["close"], params.get("regimes")).to_frame().assign(symbol=symbol)
            for symbol, frame in by_symbol(prices).items()
        ]
    )[["symbol", "regime"]]


def _labels_for(regime_labels: pd.DataFrame, symbol: str) -> pd.Series:
    return regime_labels.loc[regime_labels["symbol"] == symbol, "regime"]


def evaluate_regimes(
    sac_icm_model: Any, env_spec: EnvSpec, regime_labels: pd.DataFrame, params: dict[str, Any], seed: int
) -> pd.DataFrame:
    """Per-regime metrics on the test split of the latest model and of every baseline (same env and
    costs), one row per model × regime."""
    split = params.get("split", "test")
    labels = _labels_for(regime_labels, env_spec.symbol)
    hold_threshold = float(env_spec.config.get("hold_threshold", 0.1))
    rollouts = {
        "sac_icm": ("agent", run_episode(env_spec.make_env(split, evaluation=True), policy_from_sb3(sac_icm_model), seed=seed))
    }
    rollouts.update(
        {
            name: ("baseline", rollout)
            for name, rollout in run_baselines(lambda: env_spec.make_env(split, evaluation=True), seed=seed).items()
        }
    )
    frames = [
        regime_metrics(rollout, labels, env_spec.periods_per_year, hold_threshold).assign(
            model=name, kind=kind, symbol=env_spec.symbol, split=split
        )
        for name, (kind, rollout) in rollouts.items()
    ]
    table = pd.DataFrame([row for frame in frames for row in frame.to_dict("records")])
    leading = ["symbol", "split", "model", "kind", "regime"]
    return table[leading + [column for column in table.columns if column not in leading]]


def plot_regimes(prices: pd.DataFrame, regime_labels: pd.DataFrame, env_spec: EnvSpec, params: dict[str, Any]) -> tuple[Figure, Figure]:
    """Regime-shaded closes of the evaluated split (twice: versioned image and MLflow artifact)."""
    split = params.get("split", "test")
    bounds = env_spec.splits[split]
    close = by_symbol(prices)[env_spec.symbol]["close"].loc[pd.Timestamp(bounds["start"]) : pd.Timestamp(bounds["end"])]
    figure = plots.regime_shaded_prices(
        close, _labels_for(regime_labels, env_spec.symbol), f"{env_spec.symbol}: {split} split by causal regime"
    )
    return figure, figure

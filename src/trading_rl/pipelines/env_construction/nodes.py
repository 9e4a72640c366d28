"""Thin nodes around ``trading_rl.envs``."""

from __future__ import annotations

from typing import Any

import pandas as pd

from trading_rl.data import infer_periods_per_year
from trading_rl.envs import EnvSpec, build_env_spec, env_check_report
from trading_rl.pipelines.feature_extraction.nodes import by_symbol


def build_spec(
    prices: pd.DataFrame,
    scaled_features: pd.DataFrame,
    splits: dict[str, Any],
    params: dict[str, Any],
    scalers: dict[str, Any] | None = None,
) -> EnvSpec:
    """The symbol's env spec; with ``scalers``, it keeps the symbol's feature scaler."""
    symbol = params["symbol"]
    price_frames = by_symbol(prices)
    if symbol not in price_frames:
        raise ValueError(
            f"parameter 'env_construction.symbol' is {symbol!r}, which is not among the "
            f"extracted symbols {sorted(price_frames)}"
        )
    symbol_prices = price_frames[symbol]
    periods_per_year = params.get("periods_per_year") or infer_periods_per_year(symbol_prices.index)
    return build_env_spec(
        symbol=symbol,
        prices=symbol_prices,
        scaled_features=by_symbol(scaled_features)[symbol],
        splits=splits[symbol],
        config=dict(params.get("env") or {}),
        periods_per_year=float(periods_per_year),
        feature_scaler=(scalers or {}).get(symbol),
    )


def check_env(env_spec: EnvSpec) -> dict[str, Any]:
    report = env_check_report(env_spec)
    if not report.get("passed", False):
        raise ValueError(f"env checks failed for symbol '{env_spec.symbol}': {report}")
    return report

"""Synthetic daily OHLCV bars for tests that need a market, not a particular one."""

from __future__ import annotations

import numpy as np
import pandas as pd


def ohlcv_frame(
    close, open_=None, start: str = "2012-01-02", wick: float = 0.002, index_name: str = "timestamp"
) -> pd.DataFrame:
    """Business-day bars from ``close``: the open is the previous close (100 on the first bar)
    unless given, high and low lie ``wick`` beyond the bar's body, volume is constant."""
    close = np.asarray(close, dtype=np.float64)
    open_ = np.r_[100.0, close[:-1]] if open_ is None else np.asarray(open_, dtype=np.float64)
    return pd.DataFrame(
        {
            "open": open_,
            "high": np.maximum(open_, close) * (1.0 + wick),
            "low": np.minimum(open_, close) * (1.0 - wick),
            "close": close,
            "volume": 1e6,
        },
        index=pd.bdate_range(start, periods=close.size, name=index_name),
    )


def random_walk_prices(
    n_bars: int, seed: int, start: str = "2012-01-02", walk_length: int | None = None
) -> pd.DataFrame:
    """``ohlcv_frame`` of a random walk from 100 with drift 3e-4 and 1% volatility per bar.
    ``walk_length`` draws that many steps and keeps the first ``n_bars``, so a shorter market is a
    prefix of a longer one with the same seed."""
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0003, 0.01, walk_length or n_bars)))[:n_bars]
    return ohlcv_frame(close, start=start)


def tiny_env_spec(symbol: str = "AAA"):
    """A 60-bar env spec with two features and window 3 (train and validation splits only)."""
    from trading_rl.envs import EnvConfig, build_env_spec

    index = pd.bdate_range("2020-01-01", periods=60, name="timestamp")
    close = pd.Series(np.linspace(100.0, 110.0, len(index)), index=index)
    prices = pd.DataFrame({"open": close, "high": close + 1, "low": close - 1, "close": close, "volume": 1.0})
    features = pd.DataFrame({"a": np.sin(np.arange(60.0)), "b": np.cos(np.arange(60.0))}, index=index)
    splits = {
        "train": {"start": "2020-01-01", "end": "2020-02-14"},
        "validation": {"start": "2020-02-17", "end": "2020-03-24"},
    }
    return build_env_spec(symbol, prices, features, splits, EnvConfig(window_size=3), 252.0)

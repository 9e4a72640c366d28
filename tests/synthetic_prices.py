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

"""A small real-data env spec for tests: S&P 500 daily bars with two standardised log returns."""

from __future__ import annotations

import numpy as np
import pandas as pd
from arch.data import sp500

from trading_rl.envs import EnvConfig, build_env_spec


def sp500_returns_spec(first: str, last: str, splits: dict, config: EnvConfig | None = None):
    """The env spec of sp500 bars ``first``..``last`` with the 1- and 5-day log returns as features
    (standardised over the window), split as ``splits``."""
    prices = sp500.load().loc[first:last].rename(columns=str.lower)
    log_close = np.log(prices["close"])
    features = pd.DataFrame({"r1": log_close.diff(), "r5": log_close.diff(5)}, index=prices.index)
    scaled = (features - features.mean()) / features.std()
    return build_env_spec("sp500", prices, scaled, splits, config or EnvConfig(), 252.0)

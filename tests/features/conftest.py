"""Shared price fixtures for the feature tests: the public daily indices packaged with ``arch``."""

import arch.data.nasdaq
import arch.data.sp500
import numpy as np
import pandas as pd
import pytest

from trading_rl.features import fit_garch


def _packaged_prices(module) -> pd.DataFrame:
    prices = module.load().astype(np.float64)
    prices.columns = [column.lower().replace(" ", "_") for column in prices.columns]
    prices.index.name = "timestamp"
    return prices


@pytest.fixture(scope="session")
def sp500_prices() -> pd.DataFrame:
    return _packaged_prices(arch.data.sp500)


@pytest.fixture(scope="session")
def nasdaq_prices() -> pd.DataFrame:
    return _packaged_prices(arch.data.nasdaq)


@pytest.fixture(scope="session")
def sp500_garch_params(sp500_prices) -> dict:
    """GARCH parameters fitted on the first 1000 bars, as the default configuration does."""
    return fit_garch(np.log(sp500_prices["close"]).diff().iloc[:1000])


def random_walk_prices(n_bars: int, seed: int, freq: str = "B") -> pd.DataFrame:
    """Small synthetic OHLCV series with realistic bar geometry (low <= open, close <= high)."""
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n_bars)))
    open_ = np.r_[100.0, close[:-1]] * np.exp(rng.normal(0.0, 0.003, n_bars))
    high = np.maximum(open_, close) * (1.0 + rng.uniform(0.0, 0.01, n_bars))
    low = np.minimum(open_, close) * (1.0 - rng.uniform(0.0, 0.01, n_bars))
    volume = rng.uniform(1e5, 5e5, n_bars)
    index = pd.date_range("2020-01-01", periods=n_bars, freq=freq, name="timestamp")
    return pd.DataFrame({"open": open_, "high": high, "low": low, "close": close, "volume": volume}, index=index)


@pytest.fixture(scope="session")
def make_prices():
    """Factory for synthetic prices: ``make_prices(n_bars, seed, freq="B")``."""
    return random_walk_prices

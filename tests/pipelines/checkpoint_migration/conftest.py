"""A tiny real env spec (the last 420 S&P 500 bars from ``arch``) for the pipeline tests."""

import arch.data.sp500
import numpy as np
import pytest

from trading_rl.envs import EnvConfig, build_env_spec
from trading_rl.features import FeatureParams, apply_scaler, compute_features, fit_scaler

TRAIN_END = "2018-05-31"


@pytest.fixture(scope="session")
def tiny_env_spec():
    prices = arch.data.sp500.load().iloc[-420:].astype(np.float64)
    prices.columns = [column.lower().replace(" ", "_") for column in prices.columns]
    prices.index.name = "timestamp"
    features = compute_features(prices, FeatureParams.from_mapping({"garch": {"fit_end": TRAIN_END}})).dropna()
    scaled = apply_scaler(features, fit_scaler(features.loc[:TRAIN_END]))
    splits = {
        "train": {"start": str(features.index[0].date()), "end": TRAIN_END},
        "validation": {"start": "2018-06-01", "end": "2018-12-31"},
    }
    config = {"window_size": 3, "episode_length": 64}
    return build_env_spec("sp500", prices, scaled, splits, EnvConfig.from_mapping(config), periods_per_year=252.0)

"""Causal features, chronological splits and train-only scaling for the trading environments."""

from trading_rl.features.garch import fit_garch, garch_volatility
from trading_rl.features.indicators import (
    FeatureParams,
    compute_features,
    feature_values,
    max_lookback,
    without_masked_entries,
)
from trading_rl.features.scaling import apply_scaler, fit_scaler
from trading_rl.features.splits import make_splits, split_frame

__all__ = [
    "FeatureParams",
    "apply_scaler",
    "compute_features",
    "feature_values",
    "fit_garch",
    "fit_scaler",
    "garch_volatility",
    "make_splits",
    "max_lookback",
    "split_frame",
    "without_masked_entries",
]

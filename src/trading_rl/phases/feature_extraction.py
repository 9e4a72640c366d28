"""The feature_extraction phase: select and validate symbols, then features, splits and scalers per
symbol, from the typed ``feature_extraction`` section.

Frames that hold several symbols are long: a ``timestamp`` index plus a ``symbol`` column.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.config import stored_section
from trading_rl.data import by_symbol, load_validated_prices, long_frame, quality_report, validate_features
from trading_rl.features import (
    apply_scaler,
    compute_features,
    fit_garch,
    fit_scaler,
    make_splits,
    max_lookback,
    split_frame,
    without_masked_entries,
)
from trading_rl.features.indicators import FeatureParams
from trading_rl.features.params import FeatureExtractionParams


def load_and_validate_prices(
    raw_price_files: dict[str, Callable[[], pd.DataFrame]], params: FeatureExtractionParams
) -> pd.DataFrame:
    """Every selected symbol's prices, all validated before anything is returned
    (``data.load_validated_prices``). Split dates in the wrong order never reach it: parsing the
    section (``SplitParams.validate``) refuses them before a file is read or ``prices`` is written."""
    return load_validated_prices(params.symbols, raw_price_files, params.min_rows)


def define_splits(prices: pd.DataFrame, params: FeatureExtractionParams) -> dict[str, Any]:
    """Chronological splits per symbol, with a purge gap of the longest feature look-back."""
    gap = max_lookback(params.features)
    return {
        symbol: make_splits(frame.index, {**params.splits.to_dict(), "gap_bars": gap})
        for symbol, frame in by_symbol(prices).items()
    }


def report_price_quality(
    prices: pd.DataFrame, splits: dict[str, Any], params: FeatureExtractionParams
) -> dict[str, Any]:
    """Quality facts per symbol, stale opens counted per split with the features' stale-open rule."""
    rtol = params.features.stale_opens.rtol
    return {
        symbol: quality_report(frame, symbol, splits=splits[symbol], stale_open_rtol=rtol)
        for symbol, frame in by_symbol(prices).items()
    }


def fit_feature_params(
    prices: pd.DataFrame, splits: dict[str, Any], params: FeatureExtractionParams
) -> dict[str, dict[str, Any]]:
    """Feature parameters per symbol, with GARCH(1,1) fitted on the training split only, as the plain
    data the ``feature_params`` dataset stores (``FeatureParams.to_dict``).

    Stored so that inference and walk-forward rebuild exactly the same features.
    """
    fitted = {}
    for symbol, frame in by_symbol(prices).items():
        features = params.features
        if features.garch is not None:
            train = split_frame(frame, splits[symbol], "train")
            log_returns = np.log(train["close"]).diff().dropna()
            garch = dataclasses.replace(features.garch, params=fit_garch(log_returns, symbol), fit_end=None)
            features = dataclasses.replace(features, garch=garch)
        fitted[symbol] = features
    return {symbol: features.to_dict() for symbol, features in fitted.items()}


def build_features(prices: pd.DataFrame, feature_params: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Causal features per symbol, warm-up rows dropped, checked by the feature schema.
    ``feature_params``: ``fit_feature_params``' result as the stored dataset holds it, each symbol's
    entry read as a ``FeatureParams`` here (the one place the stored file's sections are read)."""
    typed = {
        symbol: stored_section(FeatureParams, entry, f"feature_params[{symbol}]")
        for symbol, entry in feature_params.items()
    }
    frames = {}
    for symbol, frame in by_symbol(prices).items():
        features = compute_features(frame, typed[symbol]).dropna(how="any")
        frames[symbol] = validate_features(features, f"features[{symbol}]")
    return long_frame(frames)


def fit_scalers(
    features: pd.DataFrame, prices: pd.DataFrame, splits: dict[str, Any], params: FeatureExtractionParams
) -> dict[str, Any]:
    """Scalers fitted on each symbol's training rows only (no statistics from the future), leaving
    out the entries the stale-open mask replaced."""
    price_frames = by_symbol(prices)
    return {
        symbol: fit_scaler(
            without_masked_entries(split_frame(frame, splits[symbol], "train"), price_frames[symbol], params.features),
            params.scaler.method,
            params.scaler.clip,
        )
        for symbol, frame in by_symbol(features).items()
    }


def scale_features(features: pd.DataFrame, scalers: dict[str, Any]) -> pd.DataFrame:
    """Each symbol's features through its scaler, checked by the feature schema."""
    frames = {
        symbol: validate_features(apply_scaler(frame, scalers[symbol]), f"scaled_features[{symbol}]")
        for symbol, frame in by_symbol(features).items()
    }
    return long_frame(frames)

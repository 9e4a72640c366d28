"""Thin nodes around ``trading_rl.phases.feature_extraction``: each resolves the
``feature_extraction`` section once and hands it on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from trading_rl.features.indicators import FeatureParams
from trading_rl.features.params import PARAMS_PREFIX, FeatureExtractionParams
from trading_rl.phases import feature_extraction as phase


def _section(params: dict[str, Any]) -> FeatureExtractionParams:
    return FeatureExtractionParams.from_mapping(params, PARAMS_PREFIX)


def load_and_validate_prices_node(
    raw_price_files: dict[str, Callable[[], pd.DataFrame]], params: dict[str, Any]
) -> pd.DataFrame:
    """``phases.feature_extraction.load_and_validate_prices``."""
    return phase.load_and_validate_prices(raw_price_files, _section(params))


def define_splits_node(prices: pd.DataFrame, params: dict[str, Any]) -> dict[str, Any]:
    """``phases.feature_extraction.define_splits``."""
    return phase.define_splits(prices, _section(params))


def report_price_quality_node(prices: pd.DataFrame, splits: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """``phases.feature_extraction.report_price_quality``."""
    return phase.report_price_quality(prices, splits, _section(params))


def fit_feature_params_node(prices: pd.DataFrame, splits: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """``phases.feature_extraction.fit_feature_params``, as the plain data the ``feature_params``
    dataset stores."""
    fitted = phase.fit_feature_params(prices, splits, _section(params))
    return {symbol: features.to_dict() for symbol, features in fitted.items()}


def build_features_node(prices: pd.DataFrame, feature_params: dict[str, Any]) -> pd.DataFrame:
    """``phases.feature_extraction.build_features`` on the stored ``feature_params``, each symbol's
    entry read as a ``FeatureParams``."""
    typed = {
        symbol: FeatureParams.from_mapping(entry, f"feature_params[{symbol}]")
        for symbol, entry in feature_params.items()
    }
    return phase.build_features(prices, typed)


def fit_scalers_node(
    features: pd.DataFrame, prices: pd.DataFrame, splits: dict[str, Any], params: dict[str, Any]
) -> dict[str, Any]:
    """``phases.feature_extraction.fit_scalers``."""
    return phase.fit_scalers(features, prices, splits, _section(params))

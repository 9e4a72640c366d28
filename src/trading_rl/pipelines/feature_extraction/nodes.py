"""The ``feature_extraction`` nodes that convert between the phase's typed feature parameters and the
plain data the ``feature_params`` dataset stores; the other nodes are the phase's functions
(``pipeline.py``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from trading_rl.features.indicators import FeatureParams
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.phases import feature_extraction as phase


def fit_feature_params_node(
    prices: pd.DataFrame, splits: dict[str, Any], params: FeatureExtractionParams
) -> dict[str, Any]:
    """``phases.feature_extraction.fit_feature_params``, as the plain data the ``feature_params``
    dataset stores."""
    fitted = phase.fit_feature_params(prices, splits, params)
    return {symbol: features.to_dict() for symbol, features in fitted.items()}


def build_features_node(prices: pd.DataFrame, feature_params: dict[str, Any]) -> pd.DataFrame:
    """``phases.feature_extraction.build_features`` on the stored ``feature_params``, each symbol's
    entry read as a ``FeatureParams``."""
    typed = {
        symbol: FeatureParams.from_mapping(entry, f"feature_params[{symbol}]")
        for symbol, entry in feature_params.items()
    }
    return phase.build_features(prices, typed)

"""Thin nodes around ``trading_rl.envs``: the spec (``envs.symbol_env_spec``) and its checks."""

from __future__ import annotations

from typing import Any

import pandas as pd

from trading_rl.envs import EnvConstructionParams, EnvSpec, env_check_report, symbol_env_spec
from trading_rl.features.params import PARAMS_PREFIX, FeatureExtractionParams


def symbol_env_spec_node(
    prices: pd.DataFrame,
    scaled_features: pd.DataFrame,
    splits: dict[str, Any],
    params: dict[str, Any],
    scalers: dict[str, Any],
    feature_params: dict[str, Any],
) -> EnvSpec:
    """``envs.symbol_env_spec`` with the ``env_construction`` and ``feature_extraction`` sections
    resolved (the latter for a synthetic symbol's market model)."""
    section = EnvConstructionParams.from_mapping(params, "env_construction")
    feature_section = FeatureExtractionParams.from_mapping(feature_params, PARAMS_PREFIX)
    return symbol_env_spec(prices, scaled_features, splits, section, scalers, feature_section)


def check_env(env_spec: EnvSpec) -> dict[str, Any]:
    report = env_check_report(env_spec)
    if not report.get("passed", False):
        raise ValueError(f"env checks failed for symbol '{env_spec.symbol}': {report}")
    return report

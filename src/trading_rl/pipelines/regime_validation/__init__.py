"""Causal bull/bear/sideways/high-volatility labels, per-regime metrics of the latest model(s) and
the baselines on the test split, and regime-shaded price plots."""

from trading_rl.pipelines.regime_validation.pipeline import create_pipeline

__all__ = ["create_pipeline"]

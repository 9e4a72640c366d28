"""Causal bull/bear/sideways/high-volatility labels, per-regime metrics of the walk-forward agents
and baselines on their out-of-sample test steps (``walk_forward_returns``; the test split is never
touched), and regime-shaded prices of the test windows."""

from trading_rl.pipelines.regime_validation.pipeline import create_pipeline

__all__ = ["create_pipeline"]

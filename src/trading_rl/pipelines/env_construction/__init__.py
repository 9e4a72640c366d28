"""Scaled features + splits → an env spec that rebuilds the trading envs, and their check report."""

from trading_rl.pipelines.env_construction.pipeline import create_pipeline

__all__ = ["create_pipeline"]

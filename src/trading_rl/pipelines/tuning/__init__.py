"""Optuna tuning of the walk-forward's SAC+ICM agent on the training split only: every trial on the
trial ledger, the chosen configuration as versioned parameters, its Deflated Sharpe counting every
trial. Not part of the default run."""

from trading_rl.pipelines.tuning.pipeline import create_pipeline

__all__ = ["create_pipeline"]

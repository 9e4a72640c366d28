"""Hierarchical options + HER phase: warm-started option-conditioned SAC, option controller, reports."""

from trading_rl.pipelines.options_her.pipeline import create_pipeline

__all__ = ["create_pipeline"]

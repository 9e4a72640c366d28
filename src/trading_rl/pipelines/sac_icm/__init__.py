"""Env spec → SAC + curiosity (ICM) agent, its training metrics, evaluation and collapse reports."""

from trading_rl.pipelines.sac_icm.pipeline import create_pipeline

__all__ = ["create_pipeline"]

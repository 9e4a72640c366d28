"""Deployment by registry alias: point ``trading_rl_sac_icm@champion`` at a registered version whose
gates passed, recording who, when and in which run (``trading_rl.integration.model_registry``)."""

from trading_rl.pipelines.promote.pipeline import create_pipeline

__all__ = ["create_pipeline"]

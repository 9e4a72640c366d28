"""walk_forward + regime_validation + forward, then the gate report and its comparison with the previous run.

``kedro run --pipelines validation`` alone re-validates the latest model and data versions."""

from trading_rl.pipelines.validation.pipeline import create_pipeline

__all__ = ["create_pipeline"]

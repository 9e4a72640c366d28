"""Multi-objective reward shaper: rollouts, objective-weight network, potential Φ, shaped agent, report."""

from trading_rl.pipelines.reward_shaper.pipeline import create_pipeline

__all__ = ["create_pipeline"]

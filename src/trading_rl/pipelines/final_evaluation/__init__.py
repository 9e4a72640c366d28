"""A named configuration evaluated once on the test split, next to the baselines; refused when the
trial ledger shows its test split was already spent (docs/protocol.md). Not in the default run."""

from trading_rl.pipelines.final_evaluation.pipeline import create_pipeline

__all__ = ["create_pipeline"]

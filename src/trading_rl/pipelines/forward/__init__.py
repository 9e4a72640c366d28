"""The deployed agent on bars that arrived after it was trained: an appended forward record, drift
of the new bars, decay alerts against the walk-forward, and a forward tearsheet."""

from trading_rl.pipelines.forward.pipeline import create_pipeline

__all__ = ["create_pipeline"]

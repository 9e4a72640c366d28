"""Raw OHLCV → validated prices, causal features, chronological splits, train-only scalers."""

from trading_rl.pipelines.feature_extraction.pipeline import create_pipeline

__all__ = ["create_pipeline"]

"""Rolling train/test windows over each symbol: agents trained per fold and seed, scored next to the
baselines on data they never saw; per-fold table, summary with PSR/DSR, stitched equity, plots."""

from trading_rl.pipelines.walk_forward.pipeline import create_pipeline

__all__ = ["create_pipeline"]

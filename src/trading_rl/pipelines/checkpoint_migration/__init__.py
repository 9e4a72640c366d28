"""Discrete PPO checkpoints (legacy or trained here) → backed-up, migrated, validated SAC agents."""

from trading_rl.pipelines.checkpoint_migration.pipeline import create_pipeline

__all__ = ["create_pipeline"]

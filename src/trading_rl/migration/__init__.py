"""Discrete → continuous checkpoint migration: read legacy PPO zips safely, build the SAC, validate."""

from trading_rl.migration.checkpoints import (
    CheckpointError,
    DiscreteCheckpoint,
    discrete_policy_from_checkpoint,
    inspect_discrete_checkpoint,
    sha256_hex,
)
from trading_rl.migration.comparison import compare_checkpoint, diversity_gate, evaluate_agent
from trading_rl.migration.discrete_baseline import train_discrete_baseline
from trading_rl.migration.distillation import (
    GreedyDemonstration,
    fit_mean_head,
    greedy_agreement,
    greedy_demonstration,
)
from trading_rl.migration.migrated_sac import (
    build_migrated_sac,
    fine_tune_migrated,
    hidden_weight_differences,
    layer_mapping,
    sb3_zip_bytes,
    validate_migrated_model,
)

__all__ = [
    "CheckpointError",
    "DiscreteCheckpoint",
    "GreedyDemonstration",
    "build_migrated_sac",
    "compare_checkpoint",
    "discrete_policy_from_checkpoint",
    "diversity_gate",
    "evaluate_agent",
    "fine_tune_migrated",
    "fit_mean_head",
    "greedy_agreement",
    "greedy_demonstration",
    "hidden_weight_differences",
    "inspect_discrete_checkpoint",
    "layer_mapping",
    "sb3_zip_bytes",
    "sha256_hex",
    "train_discrete_baseline",
    "validate_migrated_model",
]

"""The ``checkpoint_migration`` parameter section. No key has a code default: conf/base is their one
place (the pipeline is the only reader)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from trading_rl.config import Section, layer_widths_problem, require_not_above, setting


@dataclass(frozen=True, kw_only=True)
class PpoParams(Section):
    n_steps: int = setting(interval="[1, inf)")
    batch_size: int = setting(interval="[1, inf)")
    n_epochs: int = setting(interval="[1, inf)")
    learning_rate: float = setting(interval="(0, inf)")
    gamma: float = setting(interval="[0, 1]")


@dataclass(frozen=True, kw_only=True)
class DiscreteBaselineParams(Section):
    hidden_sizes: list[int] = setting(check=layer_widths_problem)
    total_timesteps: int = setting(interval="[1, inf)")
    reward_scale: float = setting(interval="(0, inf)")  # PPO's training rewards x this (1: the env's)
    ppo: PpoParams


@dataclass(frozen=True, kw_only=True)
class MigratedSacParams(Section):
    buffer_size: int = setting(interval="[1, inf)")
    batch_size: int = setting(interval="[1, inf)")
    learning_starts: int = setting(interval="[0, inf)")
    learning_rate: float = setting(interval="(0, inf)")

    def validate(self, prefix: str) -> None:
        require_not_above(self, prefix, "batch_size", "buffer_size")


@dataclass(frozen=True, kw_only=True)
class MigrationParams(Section):
    critic_hidden_sizes: list[int] = setting(check=layer_widths_problem)
    head_gain: float = setting(interval="(0, inf)")
    log_std_init: float
    validation_observations: int = setting(interval="[1, inf)")
    sac: MigratedSacParams


@dataclass(frozen=True, kw_only=True)
class FineTuneParams(Section):
    total_timesteps: int = setting(interval="[0, inf)")  # 0 turns the fine-tune off


@dataclass(frozen=True, kw_only=True)
class ComparisonParams(Section):
    split: Literal["train", "validation", "test"]
    min_diversity_improvement: float = setting(interval="[0, inf)")


@dataclass(frozen=True, kw_only=True)
class CheckpointMigrationParams(Section):
    expected_hidden_sizes: list[int] | None = setting(check=layer_widths_problem)  # null: any
    device: str
    discrete_baseline: DiscreteBaselineParams
    migration: MigrationParams
    fine_tune: FineTuneParams
    comparison: ComparisonParams

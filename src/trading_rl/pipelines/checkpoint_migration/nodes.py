"""The checkpoint_migration nodes that add MLflow streaming and the tearsheet to ``phases.checkpoint_migration``
(its docstring: why the nodes come in
this order)."""

from __future__ import annotations

from functools import partial
from typing import Any

from trading_rl.envs import EnvSpec
from trading_rl.evaluation.reporting.phase_tearsheet import TearsheetInput, sb3_rollouts
from trading_rl.evaluation.reporting.tearsheet_section import env_section
from trading_rl.evaluation.validation.regimes import RegimeValidationParams
from trading_rl.migration.params import CheckpointMigrationParams
from trading_rl.phases import checkpoint_migration as phase
from trading_rl.pipelines.tracking import stream_to_mlflow


def fine_tune_models_node(
    migrated_models: dict[str, Any], env_spec: EnvSpec, params: CheckpointMigrationParams, seed: int
) -> dict[str, Any]:
    """Every finished training episode's reward reaches MLflow while they train
    (``checkpoint_migration/<checkpoint>/train/*``)."""
    return phase.fine_tune_models(
        migrated_models, env_spec, params, seed, lambda stem: stream_to_mlflow(f"checkpoint_migration/{stem}")
    )


def checkpoint_migration_tearsheet(
    migrated_models: dict[str, Any],
    fine_tuned_models: dict[str, Any],
    env_spec: EnvSpec,
    params: CheckpointMigrationParams,
    seed: int,
    regime_validation: RegimeValidationParams,
) -> TearsheetInput:
    """One section per migrated checkpoint: the migrated agent (and its fine-tuned copy when there is
    one) on the comparison split of the continuous env, next to the baselines."""
    split = params.comparison.split
    make_env = partial(env_spec.make_env, split, kind="continuous", evaluation=True)
    sections = []
    for name, model in migrated_models.items():
        models = {f"{name} migrated": model}
        if name in fine_tuned_models:
            models[f"{name} fine-tuned"] = fine_tuned_models[name]
        sections.append(
            env_section(
                f"checkpoint_migration: {name} on {env_spec.symbol}, {split} split",
                env_spec.symbol,
                env_spec.periods_per_year,
                sb3_rollouts(models, make_env, seed),
                make_env,
                env_spec.closes,
                seed,
                regime_validation.regimes,
            )
        )
    return TearsheetInput(f"checkpoint_migration: {env_spec.symbol}", env_spec.env_config().hold_threshold, sections)

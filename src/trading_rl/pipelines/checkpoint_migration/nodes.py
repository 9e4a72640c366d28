"""Thin nodes around ``trading_rl.phases.checkpoint_migration`` (its docstring: why the nodes come in
this order)."""

from __future__ import annotations

from functools import partial
from typing import Any

from trading_rl.envs import EnvSpec
from trading_rl.evaluation.reporting.tearsheet_section import env_section
from trading_rl.migration.checkpoints import DiscreteCheckpoint
from trading_rl.migration.params import CheckpointMigrationParams
from trading_rl.phases import checkpoint_migration as phase
from trading_rl.pipelines.tearsheet import TearsheetInput, regimes_of, sb3_rollouts
from trading_rl.pipelines.tracking import stream_to_mlflow


def _section(params: dict[str, Any]) -> CheckpointMigrationParams:
    return CheckpointMigrationParams.from_mapping(params, "checkpoint_migration")


def check_and_back_up_legacy_checkpoints_node(
    legacy_checkpoints: dict[str, bytes], env_spec: EnvSpec, params: dict[str, Any]
) -> dict[str, bytes]:
    return phase.check_and_back_up_legacy_checkpoints(legacy_checkpoints, env_spec, _section(params))


def provide_discrete_checkpoints_node(
    legacy_checkpoint_backups: dict[str, bytes], env_spec: EnvSpec, params: dict[str, Any], seed: int
) -> dict[str, DiscreteCheckpoint]:
    return phase.provide_discrete_checkpoints(legacy_checkpoint_backups, env_spec, _section(params), seed)


def migrate_checkpoints_node(
    discrete_checkpoints: dict[str, DiscreteCheckpoint],
    env_spec: EnvSpec,
    params: dict[str, Any],
    seed: int,
    run_metadata: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    return phase.migrate_checkpoints(discrete_checkpoints, env_spec, _section(params), seed, run_metadata)


def fine_tune_models_node(
    migrated_models: dict[str, Any], env_spec: EnvSpec, params: dict[str, Any], seed: int
) -> dict[str, Any]:
    """Every finished training episode's reward reaches MLflow while they train
    (``checkpoint_migration/<checkpoint>/train/*``)."""
    return phase.fine_tune_models(
        migrated_models, env_spec, _section(params), seed, lambda stem: stream_to_mlflow(f"checkpoint_migration/{stem}")
    )


def compare_discrete_and_continuous_node(
    discrete_checkpoints: dict[str, DiscreteCheckpoint],
    migrated_models: dict[str, Any],
    fine_tuned_models: dict[str, Any],
    env_spec: EnvSpec,
    params: dict[str, Any],
    seed: int,
) -> dict[str, Any]:
    return phase.compare_discrete_and_continuous(
        discrete_checkpoints, migrated_models, fine_tuned_models, env_spec, _section(params), seed
    )


def checkpoint_migration_tearsheet(
    migrated_models: dict[str, Any],
    fine_tuned_models: dict[str, Any],
    env_spec: EnvSpec,
    params: dict[str, Any],
    seed: int,
    regime_params: dict[str, Any],
) -> TearsheetInput:
    """One section per migrated checkpoint: the migrated agent (and its fine-tuned copy when there is
    one) on the comparison split of the continuous env, next to the baselines."""
    split = params["comparison"]["split"]
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
                regimes_of(regime_params),
            )
        )
    return TearsheetInput(f"checkpoint_migration: {env_spec.symbol}", env_spec.env_config().hold_threshold, sections)

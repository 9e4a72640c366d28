"""The checkpoint_migration phase: legacy discrete checkpoints checked (without unpickling) and backed
up, migrated to continuous SAC agents that must pass their checks, optionally fine-tuned, and
compared with the discrete agents and the baselines (the diversity gate), and its tearsheet.

The pipeline's node order makes the guarantees: every legacy checkpoint is checked before the first
output exists, the backup is the first output written, and migration reads the backup, so a bad file
stops the run with nothing written and the user's folder is only ever read. What the later steps
share is the inspected checkpoint (tensors and metadata), not the zip: no loadable pickle is stored
beside the project's models.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import PurePosixPath
from typing import Any

from trading_rl.envs import EnvSpec
from trading_rl.envs.compatibility import model_signature, set_model_metadata
from trading_rl.envs.hybrid import ActionSpaceMigrator
from trading_rl.evaluation.metrics.baselines import evaluate_baselines
from trading_rl.evaluation.reporting.phase_tearsheet import TearsheetInput, sb3_rollouts
from trading_rl.evaluation.reporting.tearsheet_section import env_section
from trading_rl.evaluation.validation.regimes import RegimeValidationParams
from trading_rl.migration import (
    build_migrated_sac,
    compare_checkpoint,
    discrete_policy_from_checkpoint,
    fine_tune_migrated,
    greedy_agreement,
    greedy_demonstration,
    inspect_discrete_checkpoint,
    sb3_zip_bytes,
    train_discrete_baseline,
    validate_migrated_model,
)
from trading_rl.migration.checkpoints import DiscreteCheckpoint, migration_metadata
from trading_rl.migration.comparison import comparison_row
from trading_rl.migration.params import CheckpointMigrationParams
from trading_rl.training.device import resolve_device
from trading_rl.training.streaming import MetricsCallback, with_episode_rewards

logger = logging.getLogger(__name__)


class MigrationValidationError(RuntimeError):
    """A migrated model failed a hard check; nothing of the migration is saved."""


def _inspect(raw: bytes, name: str, env_spec: EnvSpec, params: CheckpointMigrationParams, check_hidden_sizes: bool):
    return inspect_discrete_checkpoint(
        raw,
        source_name=name,
        expected_observation_dim=env_spec.layout.dim,
        expected_hidden_sizes=params.expected_hidden_sizes if check_hidden_sizes else None,
    )


def check_and_back_up_legacy_checkpoints(
    legacy_checkpoints: dict[str, bytes], env_spec: EnvSpec, params: CheckpointMigrationParams
) -> dict[str, bytes]:
    """Check every legacy zip first (one bad file fails the run before anything is written), then
    hand the unchanged bytes to the backup dataset."""
    for name, raw in legacy_checkpoints.items():
        _inspect(raw, name, env_spec, params, check_hidden_sizes=True)
    logger.info("backing up %d legacy checkpoint(s): %s", len(legacy_checkpoints), sorted(legacy_checkpoints))
    return dict(legacy_checkpoints)


def provide_discrete_checkpoints(
    legacy_checkpoint_backups: dict[str, bytes], env_spec: EnvSpec, params: CheckpointMigrationParams, seed: int
) -> dict[str, DiscreteCheckpoint]:
    """The backed-up legacy checkpoints, or — when there are none — a PPO baseline trained here,
    inspected (read without unpickling) into tensors and metadata."""
    if legacy_checkpoint_backups:
        return {
            name: _inspect(raw, name, env_spec, params, check_hidden_sizes=False)
            for name, raw in legacy_checkpoint_backups.items()
        }
    baseline = params.discrete_baseline
    logger.info("no legacy checkpoint: training the discrete PPO baseline on %s", env_spec.symbol)
    model = train_discrete_baseline(
        env_spec.make_env("train", kind="discrete", seed=seed),
        hidden_sizes=baseline.hidden_sizes,
        total_timesteps=baseline.total_timesteps,
        seed=seed,
        device=resolve_device(params.device),
        ppo_kwargs=baseline.ppo.to_dict(),
        reward_scale=baseline.reward_scale,
    )
    name = f"{env_spec.symbol}.zip"
    return {name: _inspect(sb3_zip_bytes(model), name, env_spec, params, check_hidden_sizes=False)}


# The discrete policy's deterministic runs: the mean head is fitted on every train bar's state,
# and checked on states it was not fitted on.
FIT_SPLIT, CHECK_SPLIT = "train", "validation"


def _greedy_demonstration(checkpoint: DiscreteCheckpoint, env_spec: EnvSpec, split: str, seed: int):
    """The states the discrete policy visits on one deterministic pass over ``split``, with the
    signals of its greedy actions: the states the migrated agent meets if it acts like its source."""
    env = env_spec.make_env(split, kind="discrete", evaluation=True)
    return greedy_demonstration(
        discrete_policy_from_checkpoint(checkpoint, env, device="cpu"),
        env,
        ActionSpaceMigrator(env_spec.layout, env_spec.env_config().hold_threshold),
        f"deterministic discrete rollout, whole {split} split",
        seed=seed,
    )


def migrate_checkpoints(
    discrete_checkpoints: dict[str, DiscreteCheckpoint],
    env_spec: EnvSpec,
    params: CheckpointMigrationParams,
    seed: int,
    run_metadata: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One validated SAC per checkpoint, plus the migration report (metadata, checks and agreement
    with the discrete policy on held-out states, per file)."""
    migration = params.migration
    device = resolve_device(params.device)
    models, report = {}, {}
    metadata = {**run_metadata, **model_signature(env_spec)}
    for name, checkpoint in discrete_checkpoints.items():
        checkpoint.check_observation_dim(env_spec.layout.dim)
        model = build_migrated_sac(
            checkpoint,
            env_spec.make_env("train", kind="continuous", seed=seed),
            _greedy_demonstration(checkpoint, env_spec, FIT_SPLIT, seed),
            critic_hidden_sizes=migration.critic_hidden_sizes,
            head_gain=migration.head_gain,
            log_std_init=migration.log_std_init,
            seed=seed,
            device=device,
            sac_kwargs=migration.sac.to_dict(),
            run_metadata=metadata,
        )
        set_model_metadata(model, metadata)
        checks = validate_migrated_model(checkpoint, model, n_observations=migration.validation_observations, seed=seed)
        agreement = greedy_agreement(model, _greedy_demonstration(checkpoint, env_spec, CHECK_SPLIT, seed))
        if not (checks["passed"] and agreement["passed"]):
            raise MigrationValidationError(
                f"migration of checkpoint '{name}' failed its checks: {checks}; greedy agreement: {agreement}"
            )
        models[name] = model
        report[name] = {"metadata": migration_metadata(model), "validation": checks, "greedy_agreement": agreement}
    return models, {"symbol": env_spec.symbol, "checkpoints": report}


def fine_tune_models(
    migrated_models: dict[str, Any],
    env_spec: EnvSpec,
    params: CheckpointMigrationParams,
    seed: int,
    metrics_callback_for: Callable[[str], MetricsCallback | None] = lambda name: None,
) -> dict[str, Any]:
    """Copies of the migrated agents trained a little on the continuous env; ``{}`` when turned off.
    Every finished training episode's reward goes to ``metrics_callback_for(<checkpoint file stem>)``
    while they train (the pipeline streams it to MLflow as ``checkpoint_migration/<stem>/train/*``)."""
    timesteps = params.fine_tune.total_timesteps
    if timesteps == 0:
        return {}
    device = resolve_device(params.device)
    return {
        name: fine_tune_migrated(
            model,
            env_spec.make_env("train", kind="continuous", seed=seed),
            timesteps,
            device,
            callback=with_episode_rewards(None, metrics_callback_for(PurePosixPath(name).stem)),
        )
        for name, model in migrated_models.items()
    }


def compare_discrete_and_continuous(
    discrete_checkpoints: dict[str, DiscreteCheckpoint],
    migrated_models: dict[str, Any],
    fine_tuned_models: dict[str, Any],
    env_spec: EnvSpec,
    params: CheckpointMigrationParams,
    seed: int,
) -> dict[str, Any]:
    """Discrete vs migrated (vs fine-tuned) agents and the baselines on the evaluation split, and how
    closely each continuous agent follows the discrete policy's greedy actions on the states it visits.

    The discrete agent is rebuilt from its tensors (no unpickling), so legacy files are never loaded.
    """
    comparison = params.comparison
    split = comparison.split
    hold_threshold = env_spec.env_config().hold_threshold

    def make_env(kind: str):
        return env_spec.make_env(split, kind=kind, evaluation=True)

    per_checkpoint = {}
    for name, checkpoint in discrete_checkpoints.items():
        continuous = {"migrated": migrated_models[name]}
        if name in fine_tuned_models:
            continuous["fine_tuned"] = fine_tuned_models[name]
        per_checkpoint[name] = compare_checkpoint(
            make_env,
            discrete_policy_from_checkpoint(checkpoint, make_env("discrete"), device="cpu"),
            continuous,
            env_spec.periods_per_year,
            hold_threshold=hold_threshold,
            min_improvement=comparison.min_diversity_improvement,
            seed=seed,
        )
        demonstration = _greedy_demonstration(checkpoint, env_spec, split, seed)
        per_checkpoint[name]["greedy_agreement"] = {
            label: greedy_agreement(model, demonstration) for label, model in continuous.items()
        }
        gate = per_checkpoint[name]["gate"]
        log = logger.info if gate["passed"] else logger.warning
        log("diversity gate for %s (%s vs discrete): %s", name, gate["continuous_agent"], gate)
    baselines = evaluate_baselines(
        partial(env_spec.make_env, split, kind="continuous", evaluation=True), env_spec.periods_per_year, seed=seed
    )
    return {
        "symbol": env_spec.symbol,
        "split": split,
        "diversity": "entropy (nats) of the 5-bucket action histogram of the traded signal (max ln 5)",
        "fine_tune_timesteps": params.fine_tune.total_timesteps,
        "checkpoints": per_checkpoint,
        "all_gates_passed": all(entry["gate"]["passed"] for entry in per_checkpoint.values()),
        "baselines": {name: comparison_row(metrics) for name, metrics in baselines.items()},
    }


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

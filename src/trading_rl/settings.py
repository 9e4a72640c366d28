"""Kedro project settings."""

from trading_rl.hooks import (
    MlflowRunHygieneHooks,
    ParameterValidationHooks,
    ReproducibilityHooks,
    RunSummaryHooks,
)
from trading_rl.run_manifest import RunManifestHooks

HOOKS = (
    ReproducibilityHooks(),
    ParameterValidationHooks(),
    RunSummaryHooks(),
    MlflowRunHygieneHooks(),
    RunManifestHooks(),
)

CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # conf/<env>/parameters*.yml only need the keys they change (e.g. ci budgets).
    "merge_strategy": {"parameters": "soft"},
}

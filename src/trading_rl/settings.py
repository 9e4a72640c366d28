"""Kedro project settings."""

from trading_rl.integration.warnings_filters import quiet_known_warnings

quiet_known_warnings()

from trading_rl.integration.config_loader import ProjectConfigLoader  # noqa: E402
from trading_rl.integration.hooks import (  # noqa: E402
    MlflowRunHygieneHooks,
    ParameterValidationHooks,
    ProgressHooks,
    ReproducibilityHooks,
    RunSummaryHooks,
)
from trading_rl.integration.mlflow_hooks import MlflowConventionHooks  # noqa: E402
from trading_rl.integration.phase_inputs import PhaseInputHooks  # noqa: E402
from trading_rl.integration.run_lock import RunLockHooks  # noqa: E402
from trading_rl.integration.run_manifest import RunManifestHooks  # noqa: E402
from trading_rl.integration.run_states import RunStateHooks  # noqa: E402

HOOKS = (
    ReproducibilityHooks(),
    ParameterValidationHooks(),
    RunSummaryHooks(),
    MlflowConventionHooks(),
    MlflowRunHygieneHooks(),
    RunManifestHooks(),
    PhaseInputHooks(),
    RunStateHooks(),
    ProgressHooks(),
    RunLockHooks(),  # registered last: its tryfirst before_pipeline_run runs before every other hook's
)

# Catalog paths under data/ move to the env's globals.yml data_root (ci: data/ci), so quick runs
# never mix with real ones (trading_rl.integration.config_loader).
CONFIG_LOADER_CLASS = ProjectConfigLoader

CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # conf/<env>/parameters*.yml and mlflow.yml only need the keys they change (e.g. ci budgets).
    "merge_strategy": {"parameters": "soft", "mlflow": "soft"},
}

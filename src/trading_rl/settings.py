"""Kedro project settings."""

from trading_rl.warnings_filters import quiet_known_warnings

quiet_known_warnings()

from trading_rl.hooks import ReproducibilityHooks, ValidationGateHooks  # noqa: E402
from trading_rl.mlflow_hooks import MlflowConventionHooks  # noqa: E402

HOOKS = (ReproducibilityHooks(), ValidationGateHooks(), MlflowConventionHooks())

CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # conf/<env>/parameters*.yml only need the keys they change (e.g. ci budgets).
    "merge_strategy": {"parameters": "soft"},
}

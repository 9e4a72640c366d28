"""Kedro project settings."""

from trading_rl.hooks import ReproducibilityHooks, RunSummaryHooks

HOOKS = (ReproducibilityHooks(), RunSummaryHooks())

CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # conf/<env>/parameters*.yml only need the keys they change (e.g. ci budgets).
    "merge_strategy": {"parameters": "soft"},
}

"""Trading environments: the continuous env, the legacy discrete env, the hybrid env and their spec."""

from trading_rl.envs.checks import env_check_report, rollout_sanity
from trading_rl.envs.continuous import (
    ContinuousTradingEnv,
    EnvConfig,
    EnvConstructionParams,
    TradingEnvBase,
    trading_env,
)
from trading_rl.envs.discrete import DiscreteTradingEnv
from trading_rl.envs.hybrid import (
    DISCRETE_TO_CONTINUOUS,
    ActionSpaceMigrator,
    DiscreteAction,
    HybridTradingEnv,
    is_discrete_action,
)
from trading_rl.envs.layout import STATE_FIELDS, ObservationLayout
from trading_rl.envs.portfolio import Portfolio
from trading_rl.envs.spec import (
    ENV_KINDS,
    EnvSpec,
    build_env_spec,
    periods_per_year_by_symbol,
    symbol_env_spec,
    symbol_periods_per_year,
)

__all__ = [
    "ActionSpaceMigrator",
    "ContinuousTradingEnv",
    "DISCRETE_TO_CONTINUOUS",
    "DiscreteAction",
    "DiscreteTradingEnv",
    "ENV_KINDS",
    "EnvConfig",
    "EnvConstructionParams",
    "EnvSpec",
    "HybridTradingEnv",
    "ObservationLayout",
    "Portfolio",
    "STATE_FIELDS",
    "TradingEnvBase",
    "build_env_spec",
    "periods_per_year_by_symbol",
    "symbol_env_spec",
    "symbol_periods_per_year",
    "env_check_report",
    "is_discrete_action",
    "rollout_sanity",
    "trading_env",
]

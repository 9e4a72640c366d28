"""The seeds' env (``conf/seeds``; base before 2026-12-06): a trade-fraction action, EMA-smoothed over
3 steps, on a 10-bar window. The env's hand-computed books and the baselines' fills were written
for it, and it stays a supported configuration, so those tests pin it explicitly rather than
through the code defaults (now the validated learner's target action, no smoothing, one bar)."""

from __future__ import annotations

from typing import Any

from trading_rl.envs import EnvConfig

SEEDS_ENV: dict[str, Any] = {"action_mode": "trade", "smoothing_window": 3, "window_size": 10}


def seeds_env_config(**overrides: Any) -> EnvConfig:
    """``EnvConfig`` at the seeds' settings, ``overrides`` on top."""
    return EnvConfig(**{**SEEDS_ENV, **overrides})

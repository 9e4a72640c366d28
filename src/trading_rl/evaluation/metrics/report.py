"""One evaluation report shape for every trained agent: metrics next to baselines, plus collapse.

The agent runs twice over the same split: deterministically (what would be traded) and
stochastically (what the policy explores). Collapse gates look at both, because a deterministic
policy can collapse onto one action while its sampling still looks diverse, and vice versa.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pandas as pd

from trading_rl.envs.continuous import trading_env
from trading_rl.evaluation.metrics.attribution import (
    Attribution,
    attribution_metrics,
    env_cost_rate,
    rollout_attribution,
)
from trading_rl.evaluation.metrics.baselines import evaluate_baselines, market_returns
from trading_rl.evaluation.metrics.metrics import compute_metrics, json_ready, return_moments
from trading_rl.evaluation.metrics.rollout import Policy, run_episode
from trading_rl.monitoring.collapse import CollapseThresholds, action_stats, collapse_report


def attributed_metrics(
    rollout: pd.DataFrame, make_env: Callable[[], gym.Env], periods_per_year: float, seed: int
) -> tuple[dict[str, Any], Attribution]:
    """``compute_metrics`` of an agent's rollout on ``make_env``'s split with its return attribution
    (``attribution_metrics``) against that split's market line, at the env's own costs; and the
    attribution itself (its ``reason`` says why a value is undefined)."""
    env = make_env()
    config = trading_env(env, "attributed_metrics").config
    attribution = rollout_attribution(
        rollout, market_returns(env, seed), periods_per_year=periods_per_year, cost_rate=env_cost_rate(config)
    )
    metrics = {**compute_metrics(rollout, periods_per_year, config.hold_threshold), **attribution_metrics(attribution)}
    return metrics, attribution


def evaluate_policy(
    name: str,
    deterministic_policy: Policy,
    stochastic_policy: Policy,
    make_env: Callable[[], gym.Env],
    periods_per_year: float,
    seed: int,
    thresholds: CollapseThresholds,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return ``(evaluation_report, collapse_report)`` for one agent on ``make_env``'s split."""
    deterministic_env = make_env()
    hold_threshold = trading_env(deterministic_env, "evaluate_policy").config.hold_threshold  # the env's own rule
    rollouts = {
        "deterministic": run_episode(deterministic_env, deterministic_policy, seed=seed),
        "stochastic": run_episode(make_env(), stochastic_policy, seed=seed),
    }
    agent_metrics, attribution = attributed_metrics(rollouts["deterministic"], make_env, periods_per_year, seed)
    collapse = {
        mode: collapse_report(
            action_stats(
                rollout["action_raw"].to_numpy(), rollout["action_type"].to_numpy(), hold_threshold=hold_threshold
            ),
            thresholds,
        )
        for mode, rollout in rollouts.items()
    }
    evaluation = {
        "agent": name,
        "n_steps": int(len(rollouts["deterministic"])),
        "start": str(rollouts["deterministic"]["timestamp"].iloc[0]),
        "end": str(rollouts["deterministic"]["timestamp"].iloc[-1]),
        "metrics": agent_metrics,  # with the return attribution against the market line
        "attribution_note": attribution.reason,  # why an attribution value is undefined, if one is
        # of the deterministic run's per-step returns: what the trial ledger and DSR work from
        "return_moments": json_ready(return_moments(rollouts["deterministic"]["return"].to_numpy())),
        "stochastic_metrics": compute_metrics(rollouts["stochastic"], periods_per_year, hold_threshold),
        "baselines": evaluate_baselines(make_env, periods_per_year, seed=seed),
    }
    collapse_summary = {
        "agent": name,
        "collapsed": any(report["collapsed"] for report in collapse.values()),
        **collapse,
    }
    return evaluation, collapse_summary


def flat_metrics(report: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Numeric top-level metrics of an evaluation report as ``{prefix}/{name}: value`` (no prefix:
    ``name``; the MLflow metrics dataset adds the phase)."""
    flat = {}
    prefix = f"{prefix}/" if prefix else ""
    for key, value in report["metrics"].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[f"{prefix}{key}"] = float(value)
    for baseline, metrics in report["baselines"].items():
        for key in ("sharpe", "total_return", "max_drawdown"):
            value = metrics.get(key)
            if isinstance(value, (int, float)):
                flat[f"{prefix}baseline_{baseline}/{key}"] = float(value)
    return flat


def metrics_history(history: list[dict[str, Any]], step_key: str = "timestep") -> dict[str, list[dict]]:
    """Per-evaluation training history as kedro-mlflow's metrics-history format."""
    series: dict[str, list[dict]] = {}
    for entry in history:
        step = int(entry[step_key])
        for key, value in entry.items():
            if key == step_key or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            series.setdefault(key, []).append({"step": step, "value": float(value)})
    return series

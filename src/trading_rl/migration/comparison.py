"""Discrete vs continuous agents on one evaluation split, and the diversity gate (docs/migration.md).

Diversity is measured the same way for both agents: the Shannon entropy (nats) of the share of steps
in each of the five action buckets of ``trading_rl.monitoring.actions`` (strong/weak sell, hold,
weak/strong buy), computed by ``compute_metrics`` from the signal the env traded (``action_raw``).
The discrete env maps each of its seven actions onto that signal scale, so both entropies share one
scale with a maximum of ln 5 ≈ 1.609. The gate asks the continuous agent's diversity to be at least
``1 + min_improvement`` times the discrete agent's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trading_rl.envs.continuous import trading_env
from trading_rl.evaluation.metrics.attribution import attribution_metrics, env_cost_rate, rollout_attribution
from trading_rl.evaluation.metrics.baselines import market_returns
from trading_rl.evaluation.metrics.metrics import compute_metrics
from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode

REPORTED_METRICS = (
    "action_entropy",
    "hold_share",
    "n_trades",
    "trade_rate",
    "sharpe",
    "total_return",
    "max_drawdown",
    "n_steps",
    # return attribution against the market line (evaluation.metrics.attribution)
    "alpha_annual",
    "alpha_ci90_low",
    "alpha_ci90_high",
    "beta",
    "mean_exposure",
    "exposure_matched_sharpe",
)


def comparison_row(metrics: dict[str, Any]) -> dict[str, Any]:
    """The comparison's columns (``None`` where a metric is absent, e.g. for a price-only baseline);
    ``trade_rate`` is executed fills per step."""
    n_steps, n_trades = metrics.get("n_steps"), metrics.get("n_trades")
    trade_rate = n_trades / n_steps if n_steps and n_trades is not None else None
    summary = {key: trade_rate if key == "trade_rate" else metrics.get(key) for key in REPORTED_METRICS}
    # An entropy of one bucket comes out as -0.0; report it as 0.0.
    return {key: value + 0.0 if isinstance(value, float) else value for key, value in summary.items()}


def evaluate_agent(env, model, periods_per_year: float, hold_threshold: float, seed: int | None = None) -> dict:
    """Deterministic pass of an SB3 ``model`` through ``env``, summarised with its return
    attribution against the market line of the same bars at the env's costs."""
    rollout = run_episode(env, policy_from_sb3(model, deterministic=True), seed=seed)
    attribution = rollout_attribution(
        rollout,
        market_returns(env, seed),
        periods_per_year=periods_per_year,
        cost_rate=env_cost_rate(trading_env(env, "evaluate_agent").config),
    )
    return comparison_row(
        {
            **compute_metrics(rollout, periods_per_year, hold_threshold=hold_threshold),
            **attribution_metrics(attribution),
        }
    )


def diversity_gate(discrete_diversity: float, continuous_diversity: float, min_improvement: float = 0.2) -> dict:
    """``continuous >= (1 + min_improvement) * discrete``; a collapsed discrete agent (entropy 0)
    is beaten by any continuous agent with positive diversity, and the ratio is then undefined."""
    discrete_diversity, continuous_diversity = float(discrete_diversity), float(continuous_diversity)
    ratio = continuous_diversity / discrete_diversity if discrete_diversity > 0 else None
    return {
        "discrete_diversity": discrete_diversity,
        "continuous_diversity": continuous_diversity,
        "ratio": ratio,
        "required_ratio": 1.0 + min_improvement,
        "passed": bool(
            continuous_diversity > 0 and continuous_diversity >= (1.0 + min_improvement) * discrete_diversity
        ),
    }


def compare_checkpoint(
    make_env: Callable[[str], Any],
    discrete_model,
    continuous_models: dict[str, Any],
    periods_per_year: float,
    hold_threshold: float,
    min_improvement: float = 0.2,
    seed: int | None = None,
) -> dict[str, Any]:
    """Metrics of the discrete agent and of every continuous variant (e.g. ``migrated``,
    ``fine_tuned``); the gate judges the last variant listed, the one a user would deploy.

    ``make_env(kind)`` returns a fresh evaluation env of kind ``"discrete"`` or ``"continuous"``.
    """
    if not continuous_models:
        raise ValueError("continuous_models is empty: nothing to compare the discrete agent with")
    agents = {"discrete": evaluate_agent(make_env("discrete"), discrete_model, periods_per_year, hold_threshold, seed)}
    for label, model in continuous_models.items():
        agents[label] = evaluate_agent(make_env("continuous"), model, periods_per_year, hold_threshold, seed)
    judged = list(continuous_models)[-1]
    gate = diversity_gate(agents["discrete"]["action_entropy"], agents[judged]["action_entropy"], min_improvement)
    return {"agents": agents, "gate": {"continuous_agent": judged, **gate}}

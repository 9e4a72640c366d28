"""benchmarks/ab_walk_forward: paired walk-forward A/B summaries and the hierarchical agents' params."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from ab_walk_forward import HER_LEARNING_STARTS, ProcessExecutor, agent_parameters, summarise
from learning_curve import load_parameters


def _folds(edge: float, seeds: int = 5) -> pd.DataFrame:
    """Two agents on 2 symbols x 3 folds x ``seeds``: ``b`` = ``a`` + ``edge`` Sharpe on every window."""
    rng = np.random.default_rng(0)
    rows = []
    for symbol in ("s1", "s2"):
        for fold in range(3):
            for name in ("buy_and_hold", "random", "sma_crossover"):
                rows.append(
                    {
                        "symbol": symbol,
                        "fold": fold,
                        "seed": -1,
                        "kind": "baseline",
                        "agent": name,
                        "sharpe": 0.5,
                        "total_return": 0.05,
                        "max_drawdown": -0.1,
                    }
                )
            for seed in range(seeds):
                base = rng.normal(0.3, 0.5)
                for agent, sharpe in (("a", base), ("b", base + edge)):
                    rows.append(
                        {
                            "symbol": symbol,
                            "fold": fold,
                            "seed": seed,
                            "kind": "agent",
                            "agent": agent,
                            "sharpe": sharpe,
                            "total_return": 0.01,
                            "max_drawdown": -0.05,
                            "fill_rate": 0.3,
                            "action_entropy": 1.0,
                            "trades": True,
                        }
                    )
    return pd.DataFrame(rows)


def test_paired_difference_is_matched_by_window_and_flags_only_a_real_effect():
    summary = summarise(_folds(edge=0.4), [("b", "a")])
    pair = summary["pairs"][0]
    assert pair["windows"] == 30 and pair["sharpe"] == pytest.approx(0.4)
    assert pair["sharpe_beyond_noise"] and not pair["fill_rate_beyond_noise"]
    none = summarise(_folds(edge=0.0), [("b", "a")])["pairs"][0]
    assert none["sharpe"] == pytest.approx(0.0) and not none["sharpe_beyond_noise"]
    agents = {row["agent"]: row for row in summary["agents"]}
    assert agents["a"]["windows"] == 30 and agents["a"]["trading_share"] == 1.0
    low, high = agents["a"]["sharpe_ci"]
    assert low <= agents["a"]["sharpe"] <= high
    versus = {row["agent"]: row for row in summary["versus_buy_and_hold"]}
    assert versus["b"]["sharpe_minus_buy_and_hold"] == pytest.approx(
        np.median(_folds(edge=0.4).query("agent == 'b'")["sharpe"] - 0.5)
    )


def test_hierarchical_agents_share_the_sac_arm_settings_and_networks():
    params = load_parameters("base")
    agent_params = agent_parameters(params)
    source, phase = agent_params["options"]["source"], agent_params["options"]["phase"]
    policy = params["walk_forward"]["agent_overrides"].get("policy", params["sac_icm"]["agent"]["policy"])
    assert source.policy.net_arch == policy["net_arch"]
    assert phase.sac.batch_size == source.sac.batch_size
    assert phase.sac.learning_starts >= HER_LEARNING_STARTS > 500  # HER needs a finished episode
    assert phase.device == "auto" and phase.options.enabled


def _doubled(task: int) -> int:
    return 2 * task


def test_the_process_executor_runs_the_walk_forward_chains():
    """``run_retrain_groups`` (the walk-forward's chains: a long map) goes through ``map``, which the
    process executor must accept as the engine's executors do."""
    assert ProcessExecutor(2).run_retrain_groups(_doubled, [1, 2, 3]) == [2, 4, 6]

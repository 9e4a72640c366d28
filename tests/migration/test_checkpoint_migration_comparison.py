"""The diversity gate and the discrete-vs-continuous comparison, against hand-computed entropies."""

import math

import numpy as np
import pandas as pd
import pytest
from helpers.seeds_env import seeds_env_config

from trading_rl.envs import ContinuousTradingEnv, DiscreteTradingEnv
from trading_rl.migration import compare_checkpoint, diversity_gate
from trading_rl.migration.comparison import comparison_row


class CyclingModel:
    """SB3-like model that plays ``actions`` in turn, whatever the observation."""

    def __init__(self, actions):
        self.actions = list(actions)
        self.calls = 0

    def predict(self, observation, deterministic=False):
        action = self.actions[self.calls % len(self.actions)]
        self.calls += 1
        return action, None


def _frames(n=61, seed=0):
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    index = pd.date_range("2021-01-04", periods=n, freq="B", name="timestamp")
    prices = pd.DataFrame({"open": close, "high": close * 1.001, "low": close * 0.999, "close": close}, index=index)
    features = pd.DataFrame({"ret": np.log(prices["close"]).diff().fillna(0.0) * 50}, index=index)
    return prices, features


def _make_env(kind):
    prices, features = _frames()
    cls = DiscreteTradingEnv if kind == "discrete" else ContinuousTradingEnv
    return cls(prices, features, seeds_env_config(evaluation=True, window_size=1))


def test_gate_requires_twenty_percent_more_diversity():
    assert diversity_gate(1.0, 1.2)["passed"] and diversity_gate(1.0, 1.2)["ratio"] == pytest.approx(1.2)
    assert not diversity_gate(1.0, 1.19)["passed"]
    collapsed = diversity_gate(0.0, 0.3)
    assert collapsed["passed"] and collapsed["ratio"] is None
    assert not diversity_gate(0.0, 0.0)["passed"]


def test_summary_trade_rate_is_fills_per_step():
    summary = comparison_row({"n_trades": 3, "n_steps": 12, "sharpe": 0.5, "action_entropy": 0.1})
    assert summary["trade_rate"] == 0.25 and summary["sharpe"] == 0.5 and summary["total_return"] is None


def test_comparison_entropies_match_hand_computation():
    continuous_levels = [np.array([a], np.float32) for a in (-0.8, -0.3, 0.0, 0.3, 0.8)]
    result = compare_checkpoint(
        _make_env,
        CyclingModel([0, 1]),  # HOLD, BUY_SMALL -> signals 0 and 0.33: two buckets, half each
        {"migrated": CyclingModel([np.zeros(1, np.float32)]), "fine_tuned": CyclingModel(continuous_levels)},
        periods_per_year=252,
        hold_threshold=0.1,
    )
    agents = result["agents"]
    assert agents["discrete"]["action_entropy"] == pytest.approx(math.log(2), abs=0.02)  # 60 steps, 30/30
    assert agents["migrated"]["action_entropy"] == 0.0 and agents["migrated"]["n_trades"] == 0
    assert agents["fine_tuned"]["action_entropy"] == pytest.approx(math.log(5), abs=1e-9)  # 60 = 5 x 12
    assert agents["discrete"]["n_steps"] == 60 and agents["discrete"]["n_trades"] > 0
    # each agent is attributed against the market line of the same bars
    assert agents["migrated"]["beta"] == 0.0 and agents["migrated"]["mean_exposure"] == 0.0
    assert agents["discrete"]["mean_exposure"] > 0 and agents["discrete"]["alpha_annual"] is not None
    gate = result["gate"]
    assert gate["continuous_agent"] == "fine_tuned" and gate["passed"]
    assert gate["ratio"] == pytest.approx(math.log(5) / agents["discrete"]["action_entropy"])

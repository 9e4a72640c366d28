"""``action_mode: target``: the action is the position to hold; hand-computed fills, the no-trade band,
rewards that still sum to the log net return, and the cash baseline's flat action."""

import math

import numpy as np
import pytest
from test_portfolio import COMMISSION, SLIPPAGE, scripted_env

from trading_rl.envs import Portfolio
from trading_rl.evaluation.metrics.baselines import baseline_policies
from trading_rl.evaluation.metrics.rollout import run_episode


def portfolio(**overrides) -> Portfolio:
    settings = dict(
        initial_cash=10_000.0,
        commission_rate=COMMISSION,
        slippage_rate=SLIPPAGE,
        hold_threshold=0.1,
        max_position_pct=0.5,
        min_trade_value=25.0,
        allow_short=False,
    )
    settings.update(overrides)
    return Portfolio(**settings)


def test_rebalance_buys_the_gap_then_sells_down_and_holds_inside_the_band():
    book = portfolio()
    # 30% of 10,000 at 100: 3,000 of value at 100 x 1.0005, commission on top.
    kind, units, fill, fee, _ = book.rebalance(0.3, 100.0)
    assert kind == "buy" and fill == pytest.approx(100.05)
    assert units == pytest.approx(3000.0 / 100.05) and fee == pytest.approx(3.0)
    # Within 0.1 x 0.5 = 5% of equity of the target: no trade.
    assert book.rebalance(0.33, 100.0)[0] == "hold"
    # Down to 10%: sell (0.3 - 0.1) / 0.3 of the units' value at the reference price.
    equity = book.cash + book.units * 100.0
    sell_fraction = (book.units * 100.0 / equity - 0.1) / (book.units * 100.0 / equity)
    before = book.units
    kind, units, fill, _, _ = book.rebalance(0.1, 100.0)
    assert kind == "sell" and fill == pytest.approx(99.95)
    assert -units == pytest.approx(sell_fraction * before)
    # The cap still binds: a target above it buys up to the cap only.
    book = portfolio(max_position_pct=0.2)
    book.rebalance(0.9, 100.0)
    assert book.units * 100.05 <= 0.2 * (book.cash + book.units * 100.05) + 1e-9


def test_rebalance_never_flips_sides_in_one_step():
    book = portfolio(allow_short=True)
    book.rebalance(0.3, 100.0)
    kind, units, *_ = book.rebalance(-0.3, 100.0)
    assert kind == "sell" and book.units == 0.0  # closed the long only
    kind, units, *_ = book.rebalance(-0.3, 100.0)
    assert kind == "sell" and book.units < 0.0
    assert book.units * 100.0 / (book.cash + book.units * 100.0) == pytest.approx(-0.3, rel=0.01)


def test_target_env_maps_actions_to_positions_and_rewards_sum_to_the_log_return():
    env = scripted_env(action_mode="target")
    env.reset()
    # Long-only: -1 is flat, +1 the cap (50%), 0 half of it.
    _, _, _, _, info = env.step(np.array([0.0], dtype=np.float32))
    assert info["position_value"] / info["equity"] == pytest.approx(0.25, rel=0.02)
    rewards = [env.step(np.array([1.0], dtype=np.float32))[1]]
    _, reward, _, _, info = env.step(np.array([-1.0], dtype=np.float32))
    rewards.append(reward)
    assert info["position"] == 0.0
    assert env.unwrapped.flat_signal == -1.0
    env = scripted_env(action_mode="target")
    rollout = run_episode(env, lambda observation: np.array([0.6], dtype=np.float32))
    assert math.fsum(rollout["reward"]) == pytest.approx(math.log(rollout["equity"].iloc[-1] / 10_000.0))


def test_cash_baseline_holds_no_position_in_either_action_mode():
    for mode in ("trade", "target"):
        env = scripted_env(action_mode=mode)
        rollout = run_episode(env, baseline_policies(env, seed=0)["cash"])
        assert (rollout["position"] == 0.0).all() and rollout["equity"].iloc[-1] == 10_000.0

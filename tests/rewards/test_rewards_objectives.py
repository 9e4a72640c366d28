"""Each objective on hand-built transitions, checked against hand computation."""

import math

import numpy as np
import pytest

from trading_rl.rewards.objectives import (
    ACTIVITY,
    EXPLORATION,
    PROFIT,
    RISK,
    TIMING,
    ObjectiveParams,
    ObjectiveTracker,
    Transitions,
    novelty_cells,
)


def objectives(params=None) -> ObjectiveParams:
    return ObjectiveParams.from_mapping(params, "reward_shaper.objectives")


def step(
    tracker,
    equity,
    position,
    position_value,
    trade_units=0.0,
    fill_price=0.0,
    fees=0.0,
    action=0.0,
    intrinsic=0.0,
    cell=0,
):
    one = lambda v: np.array([v], dtype=np.float64)  # noqa: E731
    return tracker.step(
        Transitions(
            one(equity),
            one(position),
            one(position_value),
            one(trade_units),
            one(fill_price),
            one(fees),
            one(action),
            one(intrinsic),
            np.array([cell], dtype=np.int64),
        )
    )[0]


def test_closing_trade_realises_its_profit_although_the_position_is_then_zero():
    tracker = ObjectiveTracker(1, objectives())
    tracker.reset([0], 10_000.0)
    # buy 10 @ 100 (fee 0.2), marked at 105; then sell all 10 @ 110 (fee 0.22)
    opened = step(tracker, 10_049.8, 10.0, 1_050.0, trade_units=10.0, fill_price=100.0, fees=0.2, action=1.0)
    unrealised = 1_050.0 - 1_000.2
    assert opened[PROFIT] == pytest.approx(100.0 * 0.3 * unrealised / 10_000.0)
    closed = step(tracker, 10_099.58, 0.0, 0.0, trade_units=-10.0, fill_price=110.0, fees=0.22, action=-1.0)
    realised = 1_100.0 - 0.22 - 1_000.2
    assert closed[PROFIT] == pytest.approx(100.0 * (realised - 0.3 * unrealised) / 10_049.8)
    assert closed[PROFIT] > 0.5
    # over the whole trade the unrealised marks cancel: only the realised P&L remains
    assert opened[PROFIT] * 10_000.0 + closed[PROFIT] * 10_049.8 == pytest.approx(100.0 * realised)


def test_partial_close_and_short_cover_realise_their_share_after_costs():
    tracker = ObjectiveTracker(1, objectives({"profit": {"unrealized_weight": 0.0}}))
    tracker.reset([0], 10_000.0)
    step(tracker, 9_999.0, 10.0, 1_000.0, trade_units=10.0, fill_price=100.0, fees=1.0)
    half = step(tracker, 10_048.0, 5.0, 450.0, trade_units=-5.0, fill_price=90.0, fees=0.5)
    assert half[PROFIT] == pytest.approx(100.0 * (5 * 90.0 - 0.5 - 0.5 * 1_001.0) / 9_999.0)

    short = ObjectiveTracker(1, objectives({"profit": {"unrealized_weight": 0.0}}))
    short.reset([0], 10_000.0)
    step(short, 9_999.8, -10.0, -1_000.0, trade_units=-10.0, fill_price=100.0, fees=0.2)
    covered = step(short, 10_099.62, 0.0, 0.0, trade_units=10.0, fill_price=90.0, fees=0.18)
    assert covered[PROFIT] == pytest.approx(100.0 * (999.8 - 900.18) / 9_999.8)


def test_risk_penalises_drawdown_volatility_exposure_and_var():
    params = {"risk": {"volatility_window": 3, "drawdown_threshold": 0.05, "var_limit": 0.001}}
    tracker = ObjectiveTracker(1, objectives(params))
    tracker.reset([0], 100.0)
    first = step(tracker, 110.0, 1.0, 20.0)
    second = step(tracker, 99.0, 1.0, 9.0)
    alpha = 2.0 / 4.0
    r1, r2 = math.log(1.1), math.log(99.0 / 110.0)
    mean1, var1 = alpha * r1, (1 - alpha) * alpha * r1 * r1
    delta = r2 - mean1
    mean2 = mean1 + alpha * delta
    var2 = (1 - alpha) * (var1 + alpha * delta * delta)
    sigma1, sigma2 = math.sqrt(var1), math.sqrt(var2)
    var_excess = lambda sigma, mean: max(1.6448536269514722 * sigma - mean - 0.001, 0.0)  # noqa: E731
    expected1 = -100.0 * (0.0 + sigma1 + 0.01 * 20.0 / 110.0 + var_excess(sigma1, mean1))
    expected2 = -100.0 * ((0.1 - 0.05) + sigma2 + 0.01 * 9.0 / 99.0 + var_excess(sigma2, mean2))
    assert first[RISK] == pytest.approx(expected1)
    assert second[RISK] == pytest.approx(expected2)
    flat = ObjectiveTracker(1, objectives())
    flat.reset([0], 100.0)
    assert step(flat, 100.0, 0.0, 0.0)[RISK] == 0.0


def test_activity_band_passivity_and_overtrading():
    params = {"activity": {"diversity_window": 10, "target_frequency": 0.1}}  # band [0.05, 0.2]
    p = objectives(params).activity
    churner = ObjectiveTracker(1, objectives(params))
    churner.reset([0], 1.0)
    rate = 0.1
    for t in range(30):
        action = 1.0 if t % 2 == 0 else -1.0
        value = step(churner, 1.0, 0.0, 0.0, trade_units=1.0, fill_price=1.0, action=action)[ACTIVITY]
        rate += 0.1 * (1.0 - rate)
    assert rate > 0.2
    assert value == pytest.approx(-p.overtrade_penalty * (rate - 0.2) / 0.8)

    holder = ObjectiveTracker(1, objectives(params))
    holder.reset([0], 1.0)
    rate = 0.1
    for _ in range(30):
        value = step(holder, 1.0, 0.0, 0.0)[ACTIVITY]
        rate *= 0.9
    assert value == pytest.approx(-p.passive_penalty * (0.05 - rate) / 0.05)

    in_band = ObjectiveTracker(1, objectives(params))
    in_band.reset([0], 1.0)
    value = step(in_band, 1.0, 0.0, 0.0)[ACTIVITY]  # rate 0.09, actions all zero: no diversity
    assert value == pytest.approx(p.band_bonus)


def test_timing_scores_entry_and_exit_against_the_holding_range():
    tracker = ObjectiveTracker(1, objectives())
    tracker.reset([0], 10_000.0)
    assert step(tracker, 10_000.0, 10.0, 1_000.0, trade_units=10.0, fill_price=100.0)[TIMING] == 0.0
    assert step(tracker, 10_000.0, 10.0, 950.0)[TIMING] == 0.0  # close 95: the range's low
    assert step(tracker, 10_000.0, 10.0, 1_080.0)[TIMING] == 0.0  # close 108
    half = step(tracker, 10_000.0, 5.0, 540.0, trade_units=-5.0, fill_price=110.0)  # exit at 110: the high
    entry_quality = 2 * (110.0 - 100.0) / 15.0 - 1.0
    exit_quality = 1.0
    assert half[TIMING] == pytest.approx(0.5 * (entry_quality + exit_quality) / 2)
    rest = step(tracker, 10_000.0, 0.0, 0.0, trade_units=-5.0, fill_price=95.0)  # sold the rest at the low
    assert rest[TIMING] == pytest.approx(1.0 * (entry_quality - 1.0) / 2)

    short = ObjectiveTracker(1, objectives())
    short.reset([0], 10_000.0)
    step(short, 10_000.0, -10.0, -1_000.0, trade_units=-10.0, fill_price=100.0)
    step(short, 10_000.0, -10.0, -1_200.0)
    covered = step(short, 10_000.0, 0.0, 0.0, trade_units=10.0, fill_price=90.0)
    assert covered[TIMING] == pytest.approx(((2 * 10.0 / 30.0 - 1.0) + 1.0) / 2)


def test_exploration_adds_icm_reward_and_decaying_novelty():
    params = {"exploration": {"novelty_threshold": 4, "decay_rate": 1.0, "icm_weight": 0.5, "novelty_weight": 0.5}}
    tracker = ObjectiveTracker(1, objectives(params), n_cells=3)
    tracker.reset([0], 1.0)
    values = [step(tracker, 1.0, 0.0, 0.0, intrinsic=2.0, cell=1)[EXPLORATION] for _ in range(16)]
    novelty = [min(1.0, math.sqrt(4.0 / n)) for n in range(1, 17)]
    assert values == pytest.approx([0.5 * 2.0 + 0.5 * v for v in novelty])
    assert step(tracker, 1.0, 0.0, 0.0, cell=2)[EXPLORATION] == pytest.approx(0.5)


def test_rows_are_independent_and_cells_follow_the_grid():
    tracker = ObjectiveTracker(2, objectives())
    tracker.reset([0, 1], [100.0, 200.0])
    out = tracker.step(
        Transitions(
            np.array([110.0, 200.0]),
            np.zeros(2),
            np.zeros(2),
            np.zeros(2),
            np.zeros(2),
            np.zeros(2),
            np.zeros(2),
            np.zeros(2),
            np.zeros(2, dtype=np.int64),
        )
    )
    assert out[0, RISK] < 0.0 and out[1, RISK] == 0.0
    cells = novelty_cells(np.array([[-5.0, 0.5], [0.5, 5.0]]), [np.array([0.0]), np.array([0.0, 1.0])])
    assert cells.tolist() == [0 * 3 + 1, 1 * 3 + 2]


def test_unknown_objective_parameter_is_named():
    with pytest.raises(ValueError, match="roi_scal"):
        objectives({"profit": {"roi_scal": 1.0}})

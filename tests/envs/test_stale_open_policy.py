"""stale_open_policy: on a bar whose open is the previous close, ``close_fill`` fills at that bar's close.

Every expected number is written out as arithmetic, as in ``test_portfolio.py``.
"""

import math

import numpy as np
import pandas as pd
import pytest
from arch.data import sp500
from helpers.seeds_env import seeds_env_config
from helpers.walk_forward_calls import feature_section

from trading_rl.algorithms.options_her.goal import GOAL_KEYS, GoalConditionedView
from trading_rl.envs import ContinuousTradingEnv, DiscreteAction, EnvConfig, build_env_spec
from trading_rl.evaluation.validation.folds import Fold, fold_env_spec

# open[2] == close[1] and open[4] == close[3]: stale. open[3] and open[5] gap away.
OPEN = [100.0, 101.0, 101.5, 104.0, 103.5, 105.0]
CLOSE = [100.5, 101.5, 103.0, 103.5, 104.0, 106.0]
COMMISSION = 0.001
SLIPPAGE = 0.0005
CONFIG = dict(
    initial_cash=10_000.0,
    window_size=2,
    commission_rate=COMMISSION,
    slippage_rate=SLIPPAGE,
    hold_threshold=0.1,
    smoothing_window=1,
    max_position_pct=0.5,
    min_trade_value=25.0,
    evaluation=True,
    action_mode="trade",
)
ACTIONS = [0.8, -0.4, -1.0, 0.0]  # buy (cap binds), sell 40%, sell all, hold


def small_frames(open_=OPEN, close=CLOSE):
    index = pd.date_range("2020-01-01", periods=len(open_), freq="D")
    prices = pd.DataFrame(
        {"open": open_, "high": np.maximum(open_, close), "low": np.minimum(open_, close), "close": close},
        index=index,
    )
    features = pd.DataFrame({"f": np.arange(len(open_), dtype=float)}, index=index)
    return prices, features


def run(env, actions):
    _, info = env.reset()
    infos, rewards = [info], []
    for action in actions:
        _, reward, terminated, truncated, info = env.step(np.array([action], dtype=np.float32))
        infos.append(info)
        rewards.append(reward)
        if terminated or truncated:
            break
    return infos, rewards


def hand_books(reference):
    """The scripted episode's (fill price, cash, units, equity) per step for reference prices
    ``reference[k]`` of the fills at bars 2, 3 and 4, by hand."""
    buy = reference[0] * (1 + SLIPPAGE)
    units = 5000.0 / (buy * (1 + 0.5 * COMMISSION))  # cap: units × p <= 0.5 × equity after the fee
    cash = 10_000.0 - units * buy * (1 + COMMISSION)
    books = [(buy, cash, units, cash + units * CLOSE[2])]
    sell = reference[1] * (1 - SLIPPAGE)
    sold = float(np.float32(0.4)) * units  # the action arrives as float32
    cash += sold * sell * (1 - COMMISSION)
    units -= sold
    books.append((sell, cash, units, cash + units * CLOSE[3]))
    sell_all = reference[2] * (1 - SLIPPAGE)
    cash += units * sell_all * (1 - COMMISSION)
    books.append((sell_all, cash, 0.0, cash))
    books.append((0.0, cash, 0.0, cash))
    return books


@pytest.mark.parametrize(
    ("policy", "reference"),
    [
        ("close_fill", [CLOSE[2], OPEN[3], CLOSE[4]]),  # stale bars 2 and 4 fill at their close
        ("keep", [OPEN[2], OPEN[3], OPEN[4]]),  # the recorded (stale) opens
    ],
)
def test_fills_and_rewards_match_hand_books(policy, reference):
    env = ContinuousTradingEnv(*small_frames(), EnvConfig.from_mapping({"stale_open_policy": policy, **CONFIG}))
    infos, rewards = run(env, ACTIONS)
    books = hand_books(reference)
    assert [info["action_type"] for info in infos[1:]] == ["buy", "sell", "sell", "hold"]
    equity_before = 10_000.0
    for info, reward, (fill, cash, units, equity) in zip(infos[1:], rewards, books):
        assert info["fill_price"] == pytest.approx(fill, rel=1e-12)
        assert info["cash"] == pytest.approx(cash, rel=1e-12)
        assert info["position"] == pytest.approx(units, rel=1e-12, abs=1e-12)
        assert info["equity"] == pytest.approx(equity, rel=1e-12)
        assert reward == pytest.approx(math.log(equity / equity_before), rel=1e-9, abs=1e-12)
        equity_before = equity
    assert math.fsum(rewards) == pytest.approx(math.log(books[-1][3] / 10_000.0), abs=1e-12)


def test_close_fill_buys_at_103_05_on_the_stale_bar():
    """Spelled out once: the decision at bar 1's close (101.5) fills at bar 2's close 103 + 5 bp."""
    env = ContinuousTradingEnv(*small_frames(), EnvConfig.from_mapping(CONFIG))  # close_fill is the default
    infos, _ = run(env, ACTIONS[:1])
    assert infos[1]["fill_price"] == pytest.approx(103.0515, abs=1e-12)
    # Bought at bar 2's close and marked at the same close: the step loses slippage and commission.
    units = 5000.0 / (103.0515 * 1.0005)
    assert infos[1]["equity"] == pytest.approx(10_000.0 - units * 103.0515 * 0.001 - units * 103.0 * 0.0005, rel=1e-12)


def test_without_stale_opens_both_policies_fill_identically():
    open_ = [100.0, 101.0, 102.0, 104.0, 103.0, 105.0]  # no open equals the previous close
    runs = [
        run(
            ContinuousTradingEnv(*small_frames(open_), EnvConfig.from_mapping({"stale_open_policy": policy, **CONFIG})),
            ACTIONS,
        )
        for policy in ("close_fill", "keep")
    ]
    assert runs[0] == runs[1]
    assert [info["fill_price"] for info in runs[0][0][1:4]] == [
        pytest.approx(102.0 * 1.0005, rel=1e-12),
        pytest.approx(104.0 * 0.9995, rel=1e-12),
        pytest.approx(103.0 * 0.9995, rel=1e-12),
    ]


def test_tolerance_decides_what_is_stale():
    open_ = list(OPEN)
    open_[2] = CLOSE[1] * (1 + 1e-6)
    strict = run(ContinuousTradingEnv(*small_frames(open_), EnvConfig.from_mapping(CONFIG)), ACTIONS[:1])[0]
    loose = run(
        ContinuousTradingEnv(*small_frames(open_), EnvConfig.from_mapping({"stale_open_rtol": 1e-5, **CONFIG})),
        ACTIONS[:1],
    )[0]
    assert strict[1]["fill_price"] == pytest.approx(open_[2] * 1.0005, rel=1e-12)
    assert loose[1]["fill_price"] == pytest.approx(CLOSE[2] * 1.0005, rel=1e-12)


def test_fill_at_close_ignores_the_policy():
    for policy in ("close_fill", "keep"):
        env = ContinuousTradingEnv(
            *small_frames(), EnvConfig.from_mapping({"fill": "close", "stale_open_policy": policy, **CONFIG})
        )
        assert run(env, ACTIONS[:1])[0][1]["fill_price"] == pytest.approx(CLOSE[1] * 1.0005, rel=1e-12)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"stale_open_polcy": "keep"},
            "unknown parameter 'env.stale_open_polcy' \\(did you mean 'env.stale_open_policy'\\?\\)",
        ),
        ({"stale_open_policy": "open"}, "parameter 'env.stale_open_policy' must be one of"),
        ({"stale_open_rtol": -1e-9}, "parameter 'env.stale_open_rtol' must be in"),
        ({"stale_open_rtol": "tiny"}, "parameter 'env.stale_open_rtol' must be a number"),
    ],
)
def test_bad_stale_open_config_names_the_key(config, message):
    with pytest.raises(ValueError, match=message):
        ContinuousTradingEnv(*small_frames(), EnvConfig.from_mapping({**CONFIG, **config}))


def test_keep_reproduces_next_open_fills_on_sp500():
    """``keep`` is the behaviour before the policy existed: every fill at open[t+1] ± slippage."""
    prices = sp500.load().rename(columns=str.lower).loc["2003":"2006", ["open", "high", "low", "close"]]
    features = pd.DataFrame({"f": np.log(prices["close"]).diff().fillna(0.0)}, index=prices.index)
    opens, closes = prices["open"].to_numpy(), prices["close"].to_numpy()
    actions = np.tile([1.0, -1.0], 200)
    config = dict(
        evaluation=True, smoothing_window=1, max_position_pct=1.0, slippage_rate=SLIPPAGE, action_mode="trade"
    )
    stale_fills = 0
    for policy in ("keep", "close_fill"):
        infos, _ = run(
            ContinuousTradingEnv(prices, features, EnvConfig.from_mapping({"stale_open_policy": policy, **config})),
            actions,
        )
        for before, info in zip(infos[:-1], infos[1:]):
            if info["trade_units"] == 0.0:
                continue
            bar = before["bar_index"] + 1
            side = 1.0 if info["trade_units"] > 0 else -1.0
            stale = opens[bar] == closes[bar - 1]
            stale_fills += policy == "close_fill" and stale
            reference = closes[bar] if policy == "close_fill" and stale else opens[bar]
            assert info["fill_price"] == reference * (1 + side * SLIPPAGE)
    assert stale_fills > 100


@pytest.fixture(scope="module")
def stale_spec():
    prices, features = small_frames(OPEN * 3, CLOSE * 3)  # 18 bars, bars 2, 4, 8, 10, 14, 16 stale
    splits = {
        "train": {"start": prices.index[0].isoformat(), "end": prices.index[8].isoformat()},
        "test": {"start": prices.index[9].isoformat(), "end": prices.index[17].isoformat()},
    }
    config = {k: v for k, v in CONFIG.items() if k != "evaluation"}
    return prices, build_env_spec("toy", prices, features, splits, EnvConfig.from_mapping(config), 252.0)


@pytest.mark.parametrize("kind", ["continuous", "discrete", "hybrid"])
def test_every_env_kind_from_the_spec_fills_stale_bars_at_the_close(stale_spec, kind):
    prices, spec = stale_spec
    assert spec.config.stale_open_policy == "close_fill"
    env = spec.make_env("test", kind=kind)
    _, info = env.reset()
    assert info["timestamp"] == prices.index[9]  # decision at bar 9, fill at bar 10: stale
    action = int(DiscreteAction.BUY_LARGE) if kind == "discrete" else np.array([1.0], dtype=np.float32)
    _, _, _, _, info = env.step(action)
    assert info["fill_price"] == pytest.approx(prices["close"].iloc[10] * (1 + SLIPPAGE), rel=1e-12)
    kept = spec.make_env("test", kind=kind, stale_open_policy="keep")
    kept.reset()
    assert kept.step(action)[4]["fill_price"] == pytest.approx(prices["open"].iloc[10] * (1 + SLIPPAGE), rel=1e-12)


def test_goal_view_passes_the_policy_through(stale_spec):
    prices, spec = stale_spec
    env = GoalConditionedView(spec.make_env("test"))
    observation, _ = env.reset(seed=0)
    assert set(observation) == set(GOAL_KEYS)
    _, _, _, _, info = env.step(np.array([1.0], dtype=np.float32))
    assert info["fill_price"] == pytest.approx(prices["close"].iloc[10] * (1 + SLIPPAGE), rel=1e-12)


def test_walk_forward_fold_spec_carries_the_policy():
    prices = sp500.load().rename(columns=str.lower).loc[:"2003", ["open", "high", "low", "close", "volume"]]
    fold = Fold(0, 0, 300, 360, 420, retrain=True)
    feature_params = feature_section({"features": {"garch": None}})
    for policy in ("close_fill", "keep"):
        spec = fold_env_spec("sp500", prices, fold, feature_params, seeds_env_config(stale_open_policy=policy), 252.0)
        assert spec.config.stale_open_policy == policy
        env = spec.make_env("test", evaluation=True)
        _, info = env.reset()
        bar = prices.index.get_loc(info["timestamp"]) + 1
        assert prices["open"].iloc[bar] == prices["close"].iloc[bar - 1]  # 2000s sp500: stale
        _, _, _, _, info = env.step(np.array([1.0], dtype=np.float32))
        column = "close" if policy == "close_fill" else "open"
        assert info["fill_price"] == pytest.approx(prices[column].iloc[bar] * 1.0001, rel=1e-12)

"""Continuous env behaviour, checked against plain-Python re-computations of its books."""

import math

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from arch.data import sp500
from helpers.seeds_env import seeds_env_config

from trading_rl.envs import STATE_FIELDS, ContinuousTradingEnv, EnvConfig, trading_env

COMMISSION = 0.0002
SLIPPAGE = 0.0001


@pytest.fixture(scope="module")
def sp500_frames():
    raw = sp500.load()
    prices = raw.rename(columns=str.lower)[["open", "high", "low", "close", "volume"]]
    log_close = np.log(prices["close"])
    features = pd.DataFrame(
        {
            "ret_1": log_close.diff(),
            "ret_5": log_close.diff(5),
            "range": (prices["high"] - prices["low"]) / prices["close"],
        },
        index=prices.index,
    )
    features = ((features - features.mean()) / features.std()).dropna()
    return prices.loc[features.index], features


def synthetic_frames(n=60, seed=0):
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    open_ = close * np.exp(rng.normal(0, 0.003, n))
    index = pd.date_range("2021-01-01", periods=n, freq="B")
    prices = pd.DataFrame(
        {
            "open": open_,
            "high": np.maximum(open_, close) * 1.001,
            "low": np.minimum(open_, close) * 0.999,
            "close": close,
        },
        index=index,
    )
    features = pd.DataFrame(rng.normal(size=(n, 3)), index=index, columns=["a", "b", "c"])
    return prices, features


def run(env, actions, seed=None):
    obs, info = env.reset(seed=seed)
    observations, infos, rewards = [obs], [info], []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(np.array([action], dtype=np.float32))
        observations.append(obs)
        infos.append(info)
        rewards.append(reward)
        if terminated or truncated:
            break
    return observations, infos, rewards


@pytest.mark.parametrize("allow_short", [False, True])
def test_rewards_sum_to_log_net_return(sp500_frames, allow_short):
    env = ContinuousTradingEnv(*sp500_frames, seeds_env_config(allow_short=allow_short, episode_length=400))
    actions = np.random.default_rng(1).uniform(-1, 1, 400)
    _, infos, rewards = run(env, actions, seed=3)
    assert len(rewards) == 400
    assert infos[-1]["total_fees"] > 0
    assert math.fsum(rewards) == pytest.approx(math.log(infos[-1]["equity"] / 100_000.0), abs=1e-9)
    if allow_short:
        assert min(info["position"] for info in infos) < 0


@pytest.mark.parametrize("initial_cash", [100_000.0, 300.0])
@pytest.mark.parametrize("allow_short", [False, True])
def test_random_actions_respect_the_trade_rules(sp500_frames, initial_cash, allow_short):
    prices, features = sp500_frames
    env = ContinuousTradingEnv(prices, features, seeds_env_config(initial_cash=initial_cash, allow_short=allow_short))
    raw = np.random.default_rng(7).uniform(-1, 1, 100).astype(np.float32)
    _, infos, _ = run(env, raw, seed=11)
    opens, closes = prices["open"].to_numpy(), prices["close"].to_numpy()

    # Smoothing recomputed independently: pandas EMA with alpha = 2 / (3 + 1), first value = raw.
    expected_smoothed = pd.Series(raw.astype(np.float64)).ewm(alpha=0.5, adjust=False).mean().to_numpy()
    smoothed = np.array([info["action_smoothed"] for info in infos[1:]])
    np.testing.assert_allclose(smoothed, expected_smoothed, rtol=0, atol=1e-12)

    cash, units = initial_cash, 0.0
    stale_fills = 0
    for before, info, s in zip(infos[:-1], infos[1:], expected_smoothed):
        bar = before["bar_index"]
        assert info["bar_index"] == bar + 1
        traded = info["trade_units"]
        if abs(s) <= 0.1:
            assert info["action_type"] == "hold" and traded == 0.0
        if traded != 0.0:
            fill = info["fill_price"]
            side = 1.0 if traded > 0 else -1.0
            # Default stale_open_policy close_fill: an open equal to the decision bar's close is not a
            # traded price, so the order fills at the next bar's close instead.
            stale = opens[bar + 1] == closes[bar]
            stale_fills += stale
            reference = closes[bar + 1] if stale else opens[bar + 1]
            assert fill == pytest.approx(reference * (1 + side * SLIPPAGE), rel=1e-12)
            assert abs(traded) * fill >= 25.0  # min trade value
            if traded > 0 and units >= 0:  # a buy that opens or adds to a long
                cash_at_fill = cash - traded * fill * (1 + COMMISSION)
                value = (units + traded) * fill
                assert value <= 0.15 * (cash_at_fill + value) * (1 + 1e-12)
            if traded < 0 and units > 0:  # a sell never exceeds the long position
                assert -traded <= units * (1 + 1e-12)
        # Independent ledger: commission on |value|, paid from cash.
        cash -= traded * info["fill_price"] + abs(traded * info["fill_price"]) * COMMISSION
        units += traded
        assert info["cash"] == pytest.approx(max(cash, 0.0), rel=1e-9, abs=1e-9)
        assert info["cash"] >= 0.0
        assert info["position"] == pytest.approx(units, rel=1e-9, abs=1e-12)
        assert info["equity"] == pytest.approx(info["cash"] + info["position"] * closes[bar + 1], rel=1e-12)
        if not allow_short:
            assert info["position"] >= 0.0
    assert stale_fills > 0, "the episode should cross the sp500's stale-open years"
    reasons = {info["skipped"] for info in infos[1:]} - {None}
    if initial_cash == 300.0:  # 15 % of 300 is 45: many trades fall below 25
        assert "min_trade_value" in reasons or "position_cap" in reasons


def test_smoothing_reduces_action_variance_by_more_than_30_percent(sp500_frames):
    env = ContinuousTradingEnv(*sp500_frames, seeds_env_config(evaluation=True))
    raw = np.random.default_rng(5).uniform(-1, 1, 2000).astype(np.float32)
    _, infos, _ = run(env, raw)
    smoothed = np.array([info["action_smoothed"] for info in infos[1:]])
    reduction = 1.0 - smoothed.var() / raw[: len(smoothed)].var()
    print(f"smoothing_window=3 reduces the variance of uniform random actions by {reduction:.1%}")
    # An EMA with alpha = 0.5 of i.i.d. inputs keeps alpha / (2 - alpha) = 1/3 of the variance.
    assert reduction > 0.30
    assert reduction == pytest.approx(2.0 / 3.0, abs=0.05)


def test_no_look_ahead_in_observation_and_fill():
    prices, features = synthetic_frames()
    actions = np.tile([1.0, -1.0], 20)  # with smoothing_window=1 every step trades (buy, sell all)
    cut = 25  # bar t: everything after it gets altered
    altered_prices, altered_features = prices.copy(), features.copy()
    altered_prices.iloc[cut + 1 :] *= 1.7
    altered_features.iloc[cut + 1 :] = -altered_features.iloc[cut + 1 :] + 3.0

    config = dict(evaluation=True, window_size=5, smoothing_window=1)
    obs_a, infos_a, _ = run(ContinuousTradingEnv(prices, features, EnvConfig.from_mapping(config)), actions)
    obs_b, infos_b, _ = run(
        ContinuousTradingEnv(altered_prices, altered_features, EnvConfig.from_mapping(config)), actions
    )
    at_cut = next(i for i, info in enumerate(infos_a) if info["bar_index"] == cut)
    for i in range(at_cut + 1):  # observations up to and including bar t are unchanged
        np.testing.assert_array_equal(obs_a[i], obs_b[i])
    assert not np.array_equal(obs_a[at_cut + 1], obs_b[at_cut + 1])

    # The decision taken on bar t fills at open[t+1]: the altered run fills 1.7 times higher.
    decided_a, decided_b = infos_a[at_cut + 1], infos_b[at_cut + 1]
    assert decided_a["trade_units"] != 0 and decided_b["trade_units"] != 0
    side = 1.0 if decided_a["trade_units"] > 0 else -1.0
    assert decided_a["fill_price"] == pytest.approx(prices["open"].iloc[cut + 1] * (1 + side * SLIPPAGE), rel=1e-12)
    assert decided_b["fill_price"] == pytest.approx(decided_a["fill_price"] * 1.7, rel=1e-12)


def test_fill_modes_use_next_open_or_same_close():
    prices, features = synthetic_frames()
    for fill, column, offset in (("next_open", "open", 1), ("close", "close", 0)):
        env = ContinuousTradingEnv(prices, features, seeds_env_config(evaluation=True, fill=fill, smoothing_window=1))
        _, info = env.reset()
        bar = info["bar_index"]
        _, _, _, _, info = env.step(np.array([1.0], dtype=np.float32))
        assert info["fill_price"] == pytest.approx(prices[column].iloc[bar + offset] * (1 + SLIPPAGE), rel=1e-12)


def test_observation_layout_matches_the_data():
    prices, features = synthetic_frames()
    env = ContinuousTradingEnv(prices, features, seeds_env_config(evaluation=True, window_size=4, smoothing_window=1))
    layout = env.layout
    assert layout.dim == 4 * 3 + len(STATE_FIELDS) == env.observation_space.shape[0]
    obs, info = env.reset()
    bar = info["bar_index"]
    assert bar == 3
    window = features.iloc[bar - 3 : bar + 1].to_numpy(np.float32)
    np.testing.assert_array_equal(layout.get(obs, "features"), window.ravel())
    np.testing.assert_array_equal(layout.feature_window(obs), window)
    assert layout.get(obs, "feature:b") == np.float32(features["b"].iloc[bar])
    assert layout.get(obs, "cash_fraction") == 1.0 and layout.get(obs, "position_fraction") == 0.0

    obs, _, _, _, info = env.step(np.array([0.9], dtype=np.float32))
    close = prices["close"].iloc[bar + 1]
    assert layout.get(obs, "position_fraction") == pytest.approx(info["position_value"] / info["equity"], rel=1e-6)
    assert layout.get(obs, "cash_fraction") == pytest.approx(info["cash"] / info["equity"], rel=1e-6)
    assert layout.get(obs, "unrealized_pnl") == pytest.approx(close / info["fill_price"] - 1.0, rel=1e-5)
    assert layout.get(obs, "time_in_position") == pytest.approx(1 / 500)
    assert layout.get(obs, "last_action") == pytest.approx(0.9, rel=1e-6)
    obs2, _, _, _, _ = env.step(np.array([0.0], dtype=np.float32))
    assert layout.get(obs2, "time_in_position") == pytest.approx(2 / 500)

    batch = np.stack([obs, obs2])
    np.testing.assert_array_equal(layout.get(batch, "last_action"), [obs[-1], obs2[-1]])
    assert layout.get(batch, "state").shape == (2, len(STATE_FIELDS))
    assert layout.get(batch, "features").shape == (2, 12)


def test_random_starts_are_seeded_and_episodes_truncate_at_length():
    prices, features = synthetic_frames(n=200)
    env = ContinuousTradingEnv(prices, features, seeds_env_config(episode_length=30, window_size=5))
    starts = []
    for seed in range(20):
        _, info = env.reset(seed=seed)
        starts.append(info["bar_index"])
        assert 4 <= info["bar_index"] <= 199 - 30
    assert len(set(starts)) > 5
    assert env.reset(seed=3)[1]["bar_index"] == env.reset(seed=3)[1]["bar_index"]
    _, infos, rewards = run(env, np.zeros(100), seed=1)
    assert len(rewards) == 30 and infos[-1]["step"] == 30


def test_evaluation_is_deterministic_and_covers_the_frame():
    prices, features = synthetic_frames(n=80)
    env = ContinuousTradingEnv(prices, features, seeds_env_config(evaluation=True, episode_length=10, window_size=6))
    actions = np.sin(np.arange(200) * 0.7)
    _, infos_a, _ = run(env, actions, seed=1)
    _, infos_b, _ = run(env, actions, seed=2)
    assert [i["equity"] for i in infos_a] == [i["equity"] for i in infos_b]
    assert infos_a[0]["timestamp"] == prices.index[5]
    assert infos_a[-1]["timestamp"] == prices.index[-1]
    assert len(infos_a) - 1 == 80 - 6
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.array([0.0], dtype=np.float32))


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"comission_rate": 0.001}, "comission_rate"),
        ({"commission_rate": -0.001}, "commission_rate"),
        ({"slippage_rate": -1e-4}, "slippage_rate"),
        ({"hold_threshold": 1.0}, "hold_threshold"),
        ({"hold_threshold": -0.1}, "hold_threshold"),
        ({"max_position_pct": 0.0}, "max_position_pct"),
        ({"window_size": 0}, "window_size"),
        ({"window_size": 60}, "window_size"),
        ({"smoothing_window": 2.5}, "smoothing_window"),
        ({"fill": "vwap"}, "fill"),
        ({"initial_cash": 0}, "initial_cash"),
        ({"allow_short": "yes"}, "allow_short"),
    ],
)
def test_bad_config_is_rejected_with_the_key_named(config, key):
    with pytest.raises(ValueError, match=key):
        ContinuousTradingEnv(*synthetic_frames(), EnvConfig.from_mapping(config))


def test_bad_frames_are_rejected():
    prices, features = synthetic_frames()
    with pytest.raises(ValueError, match="same index"):
        ContinuousTradingEnv(prices, features.iloc[1:], seeds_env_config())
    holed = features.copy()
    holed.iloc[7, 1] = np.nan
    with pytest.raises(ValueError, match=r"NaN.*\['b'\]"):
        ContinuousTradingEnv(prices, holed, seeds_env_config())
    with pytest.raises(ValueError, match="open"):
        ContinuousTradingEnv(prices.drop(columns="open"), features, seeds_env_config())


def test_bar_index_and_episode_bounds_follow_the_episode():
    prices, features = synthetic_frames(n=120)
    env = ContinuousTradingEnv(prices, features, seeds_env_config(episode_length=20, window_size=5))
    _, info = env.reset(seed=4)
    start, end = env.episode_bounds
    assert start == info["bar_index"] == env.bar_index and end == start + 20
    env.step(np.array([0.0], dtype=np.float32))
    assert env.bar_index == start + 1 and "feature:a" in env.layout and "feature:z" not in env.layout


def test_trading_env_finds_the_trading_env_under_wrappers_and_names_who_needed_it_otherwise():
    prices, features = synthetic_frames()
    base = ContinuousTradingEnv(prices, features, seeds_env_config(window_size=2))
    assert trading_env(gym.wrappers.TimeLimit(base, max_episode_steps=5), "the test") is base

    class OtherEnv(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    expected = r"the curriculum: expected a trading env \(TradingEnvBase\) under the wrappers, got OtherEnv"
    with pytest.raises(ValueError, match=expected):
        trading_env(gym.wrappers.TimeLimit(OtherEnv(), max_episode_steps=5), "the curriculum")

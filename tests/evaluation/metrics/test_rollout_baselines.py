"""Rollouts and baselines: plumbing on a scripted fake env, baseline behaviour on the real env."""

import functools
import json
import math

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from arch.data import sp500
from helpers.seeds_env import seeds_env_config

from trading_rl.evaluation.metrics import baselines as b
from trading_rl.evaluation.metrics.metrics import compute_metrics
from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode, trade_returns


class ScriptedEnv(gym.Env):
    """Replays a fixed equity path; the observation is the step index, so the test can see which
    observation each action was chosen on."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, equity, initial_equity=1000.0, truncate_at=None):
        self.equity = list(equity)
        self.initial_equity = initial_equity
        self.truncate_at = truncate_at
        self.actions = []
        self.reset_seeds = []
        self.reset_options = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.reset_seeds.append(seed)
        self.reset_options.append(options)
        self.t = 0
        return np.array([0.0], np.float32), {"equity": self.initial_equity, "cash": self.initial_equity}

    def step(self, action):
        self.actions.append(np.asarray(action).copy())
        equity = self.equity[self.t]
        self.t += 1
        info = {
            "equity": equity,
            "cash": np.float64(equity / 2),
            "position": 1.0,
            "action_raw": np.asarray(action, dtype=np.float32),
            "timestamp": pd.Timestamp("2020-01-01") + pd.Timedelta(days=self.t),
        }
        terminated = self.t == len(self.equity)
        truncated = self.truncate_at is not None and self.t == self.truncate_at
        return np.array([float(self.t)], np.float32), math.log(equity / 1000.0), terminated, truncated, info


def test_run_episode_records_one_row_per_step_with_info_and_returns():
    env = ScriptedEnv([1010.0, 999.9, 1030.0])
    seen = []

    def policy(obs):
        seen.append(float(obs[0]))
        return np.array([0.25 * len(seen)], np.float32)

    rollout = run_episode(env, policy, seed=42, options={"desired_goal": 0.02})
    assert env.reset_seeds == [42] and env.reset_options == [{"desired_goal": 0.02}]
    assert seen == [0.0, 1.0, 2.0]
    assert len(rollout) == 3 and rollout.index.tolist() == [0, 1, 2]
    np.testing.assert_allclose(rollout["return"], [0.01, 999.9 / 1010 - 1, 1030 / 999.9 - 1])
    np.testing.assert_allclose(rollout["reward"], np.log(np.array([1010.0, 999.9, 1030.0]) / 1000))
    assert rollout["action_raw"].tolist() == [0.25, 0.5, 0.75]  # (1,) arrays unwrapped to numbers
    assert rollout["cash"].dtype == np.float64 and rollout["timestamp"].iloc[0] == pd.Timestamp("2020-01-02")
    assert rollout["terminated"].tolist() == [False, False, True]
    assert (1 + rollout["return"]).prod() == pytest.approx(1.03)


def test_run_episode_stops_on_truncation_and_max_steps():
    assert len(run_episode(ScriptedEnv([1000.0] * 10, truncate_at=4), lambda o: np.zeros(1))) == 4
    assert len(run_episode(ScriptedEnv([1000.0] * 10), lambda o: np.zeros(1), max_steps=6)) == 6


def test_policy_from_sb3_calls_predict_with_the_flag():
    class FakeModel:
        def predict(self, observation, deterministic=False):
            return np.array([0.5 if deterministic else -0.5], np.float32) * observation, None

    obs = np.array([2.0], np.float32)
    assert policy_from_sb3(FakeModel())(obs)[0] == pytest.approx(1.0)
    assert policy_from_sb3(FakeModel(), deterministic=False)(obs)[0] == pytest.approx(-1.0)


def test_trade_returns_by_hand():
    equity = [1000.0, 990.0, 1010.0, 1010.0, 1030.0, 1020.0, 1040.0, 1035.0]
    rollout = pd.DataFrame(
        {
            "equity": equity,
            "return": np.array(equity) / np.array([1000.0] + equity[:-1]) - 1.0,
            "position": [0.0, 1.0, 0.5, 0.0, -2.0, 3.0, 3.0, 3.0],
        }
    )
    trades = trade_returns(rollout)
    # long rows 1-2 closes at row 3; short opens row 4 and flips at row 5 (closing it, opening a
    # long); the long is still open at the last row.
    assert trades["entry_row"].tolist() == [1, 4, 5]
    assert trades["exit_row"].tolist() == [3, 5, 7]
    assert trades["side"].tolist() == [1, -1, 1]
    np.testing.assert_allclose(trades["pnl"], [1010 - 1000, 1020 - 1010, 1035 - 1030])
    np.testing.assert_allclose(trades["return"], [10 / 1000, 10 / 1010, 5 / 1030])
    assert trades["closed"].tolist() == [True, True, False]


def test_trade_returns_entry_on_the_first_step_uses_the_initial_equity():
    rollout = pd.DataFrame({"equity": [990.0, 1000.0], "return": [-0.01, 1000 / 990 - 1], "position": [1.0, 1.0]})
    trades = trade_returns(rollout)
    assert trades["pnl"].tolist() == pytest.approx([0.0])  # 1000 before entry, 1000 at the end
    assert trades["closed"].tolist() == [False]


def test_trade_returns_without_trades():
    flat = pd.DataFrame({"equity": [1000.0] * 3, "return": [0.0] * 3, "position": [0.0] * 3})
    assert trade_returns(flat).empty
    assert trade_returns(flat.iloc[:0]).empty


# --- the real env ---------------------------------------------------------------------------------

INITIAL_CASH = 100_000.0
COMMISSION, SLIPPAGE, CAP = 0.0002, 0.0001, 0.15
WINDOW = 3


@pytest.fixture(scope="module")
def envs():
    import trading_rl.envs

    return trading_rl.envs


def _frame(close, open_=None):
    close = np.asarray(close, dtype=float)
    open_ = np.concatenate(([close[0]], close[:-1] * 1.002)) if open_ is None else np.asarray(open_, float)
    index = pd.date_range("2021-01-04", periods=close.size, freq="B", name="timestamp")
    prices = pd.DataFrame(
        {"open": open_, "high": np.maximum(open_, close), "low": np.minimum(open_, close), "close": close}, index=index
    )
    features = pd.DataFrame({"log_return": np.log(prices["close"]).diff().fillna(0.0) * 10}, index=index)
    return prices, features


@functools.cache
def _sp500_bars(n_bars):
    raw = sp500.load().iloc[-n_bars:]
    return raw["Close"].to_numpy(), raw["Open"].to_numpy()


def _sp500_frame(n_bars=400):
    close, open_ = _sp500_bars(n_bars)
    return _frame(close, open_)


def _make_env(envs, prices, features, **config):
    return lambda: envs.ContinuousTradingEnv(
        prices,
        features,
        envs.EnvConfig.from_mapping(
            {"evaluation": True, "window_size": WINDOW, "action_mode": "trade", "smoothing_window": 3, **config}
        ),
    )


def test_rollout_on_the_real_env_compounds_to_the_net_return(envs):
    env = _make_env(envs, *_sp500_frame())()
    rollout = run_episode(env, b.random_policy(env.action_space, seed=1))
    final = rollout["equity"].iloc[-1]
    assert len(rollout) == 400 - WINDOW
    assert (1 + rollout["return"]).prod() == pytest.approx(final / INITIAL_CASH, rel=1e-10)
    assert rollout["reward"].sum() == pytest.approx(math.log(final / INITIAL_CASH), rel=1e-9)
    for column in (
        "cash",
        "position",
        "fees",
        "trade_value",
        "action_raw",
        "action_smoothed",
        "action_type",
        "timestamp",
    ):
        assert column in rollout
    assert rollout["truncated"].iloc[-1] and not rollout["truncated"].iloc[:-1].any()
    metrics = compute_metrics(rollout, periods_per_year=252, hold_threshold=0.1)
    assert metrics["n_trades"] == int((rollout["trade_units"] != 0).sum()) > 10
    assert metrics["n_steps"] == len(rollout)


def test_sb3_policy_runs_through_the_env(envs):
    from stable_baselines3 import SAC

    make_env = _make_env(envs, *_sp500_frame(120))
    model = SAC("MlpPolicy", make_env(), seed=0)
    first = run_episode(make_env(), policy_from_sb3(model))
    again = run_episode(make_env(), policy_from_sb3(model))
    assert len(first) == 120 - WINDOW
    pd.testing.assert_series_equal(first["action_raw"], again["action_raw"])


def test_baselines_need_a_trading_env_with_a_box_action_space(envs):
    prices, features = _sp500_frame(60)
    discrete = envs.DiscreteTradingEnv(prices, features, seeds_env_config(evaluation=True, window_size=WINDOW))
    with pytest.raises(ValueError, match="the baselines need a Box action space, got Discrete"):
        b.baseline_policies(discrete, seed=0)
    expected = r"the baselines: expected a trading env \(TradingEnvBase\) under the wrappers, got ScriptedEnv"
    with pytest.raises(ValueError, match=expected):
        b.baseline_policies(ScriptedEnv([1000.0, 1001.0]), seed=0)


def test_cash_never_trades_and_returns_exactly_zero(envs):
    rollout = b.run_baselines(_make_env(envs, *_sp500_frame()))["cash"]
    assert (rollout["equity"] == INITIAL_CASH).all()
    metrics = compute_metrics(rollout, 252, 0.1)
    assert metrics["total_return"] == 0.0 and metrics["n_trades"] == 0 and metrics["turnover"] == 0.0
    assert metrics["hold_share"] == 1.0


def test_buy_and_hold_is_one_capped_buy_tracked_by_hand(envs):
    close = 100.0 * 1.01 ** np.arange(30)  # steadily rising: the capped position is never topped up
    prices, features = _frame(close)
    rollout = b.run_baselines(_make_env(envs, prices, features))["buy_and_hold"]

    start = WINDOW - 1  # first decision at bar 2's close, filled at bar 3's open
    fill = prices["open"].iloc[start + 1] * (1 + SLIPPAGE)
    units = CAP * INITIAL_CASH / (fill * (1 + CAP * COMMISSION))  # 15% of equity after the trade
    cash = INITIAL_CASH - units * fill * (1 + COMMISSION)
    expected_equity = cash + units * close[start + 1 :]
    np.testing.assert_allclose(rollout["equity"], expected_equity, rtol=1e-12)
    assert (rollout["trade_units"] != 0).sum() == 1
    assert rollout["trade_value"].iloc[0] == pytest.approx(units * fill)
    # equity moves by 15% of the price move, less the entry costs
    gain = rollout["equity"].iloc[-1] - INITIAL_CASH
    price_gain = close[-1] / fill - 1
    assert gain == pytest.approx(CAP * INITIAL_CASH * price_gain / (1 + CAP * COMMISSION) - units * fill * COMMISSION)


def test_buy_and_hold_on_real_prices_only_buys_a_few_times(envs):
    rollout = b.run_baselines(_make_env(envs, *_sp500_frame()))["buy_and_hold"]
    fills = rollout.loc[rollout["trade_units"] != 0]
    assert 1 <= len(fills) <= 10
    assert (fills["trade_units"] > 0).all()  # top-ups back to the cap, never a sale
    assert fills["trade_value"].iloc[0] == pytest.approx(CAP * INITIAL_CASH, rel=1e-3)
    exposure = rollout["position_value"] / rollout["equity"]
    assert exposure.between(0.12, 0.18).all()


def test_random_baseline_is_reproducible(envs):
    make_env = _make_env(envs, *_sp500_frame())
    first = b.run_baselines(make_env, seed=3)["random"]
    again = b.run_baselines(make_env, seed=3)["random"]
    other = b.run_baselines(make_env, seed=4)["random"]
    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first["action_raw"], other["action_raw"])
    assert first["action_raw"].min() < -0.9 and first["action_raw"].max() > 0.9


def test_sma_signal_matches_pandas_rolling_means():
    close, _ = _sp500_bars(400)
    s = pd.Series(close)
    fast, slow = s.rolling(20).mean(), s.rolling(50).mean()
    expected = np.where(fast > slow, 1.0, -1.0)
    expected[:49] = 0.0
    np.testing.assert_array_equal(b.sma_crossover_signal(close, 20, 50), expected)
    assert set(np.unique(expected[49:])) == {-1.0, 1.0}


def test_sma_signal_is_causal():
    close, _ = _sp500_bars(400)
    signal = b.sma_crossover_signal(close)
    for t in (60, 150, 300):
        changed = close.copy()
        changed[t + 1 :] *= np.random.default_rng(t).uniform(0.5, 1.5, changed.size - t - 1)
        np.testing.assert_array_equal(b.sma_crossover_signal(changed)[: t + 1], signal[: t + 1])
        assert not np.array_equal(b.sma_crossover_signal(changed), signal)


def test_sma_policy_acts_on_the_decision_bar_and_ignores_the_future(envs):
    close, open_ = _sp500_bars(400)
    rollout = b.run_baselines(_make_env(envs, *_frame(close, open_)))["sma_crossover"]
    signal = b.sma_crossover_signal(close)
    # step i decides at bar WINDOW - 1 + i (its close), the bar before the one it is marked at
    np.testing.assert_array_equal(rollout["action_raw"], signal[WINDOW - 1 : -1])
    np.testing.assert_array_equal(rollout["bar_index"], np.arange(WINDOW, 400))

    cut = 250
    changed_close = close.copy()
    changed_close[cut + 1 :] = changed_close[cut + 1 :][::-1]
    changed_open = open_.copy()
    changed_open[cut + 1 :] = changed_open[cut + 1 :][::-1]
    changed = b.run_baselines(_make_env(envs, *_frame(changed_close, changed_open)))["sma_crossover"]
    decided_by_cut = cut - (WINDOW - 1) + 1  # steps deciding at bars <= cut
    np.testing.assert_array_equal(
        changed["action_raw"].iloc[:decided_by_cut], rollout["action_raw"].iloc[:decided_by_cut]
    )
    assert not np.array_equal(changed["action_raw"], rollout["action_raw"])


def test_evaluate_baselines_reports_every_baseline_and_the_market_line(envs):
    prices, features = _sp500_frame()
    results = b.evaluate_baselines(_make_env(envs, prices, features), periods_per_year=252, seed=0)
    assert set(results) == {"buy_and_hold", "cash", "random", "sma_crossover", "buy_and_hold_full"}
    close = prices["close"].to_numpy()
    assert results["buy_and_hold_full"]["total_return"] == pytest.approx(close[-1] / close[WINDOW - 1] - 1)
    assert {r["n_steps"] for r in results.values()} == {400 - WINDOW}
    assert results["cash"]["total_return"] == 0.0
    # the capped long moves with the market at about 15% of its size
    ratio = results["buy_and_hold"]["total_return"] / results["buy_and_hold_full"]["total_return"]
    assert 0.1 < ratio < 0.2
    # every baseline that runs through the env carries its attribution against the market line
    from trading_rl.evaluation.metrics.attribution import ATTRIBUTION_METRICS

    for name in b.BASELINE_NAMES:
        assert set(ATTRIBUTION_METRICS) <= set(results[name])
    assert results["cash"]["beta"] == 0.0 and results["cash"]["mean_exposure"] == 0.0
    assert 0.1 < results["buy_and_hold"]["beta"] < 0.2
    assert results["buy_and_hold"]["mean_exposure"] == pytest.approx(results["buy_and_hold"]["beta"], abs=0.03)
    json.dumps(results, allow_nan=False)


# ---------------------------------------------------------------- SMA with the history before a window

SMA_SPLITS = {
    "train": {"start": "2012-01-01", "end": "2015-12-31"},
    "validation": {"start": "2016-01-01", "end": "2017-06-30"},
    "test": {"start": "2017-07-01", "end": "2018-12-31"},
}


def _sp500_spec(close_factor=None):
    from trading_rl.envs import build_env_spec

    prices = sp500.load().loc["2011-01-01":"2018-12-31"].rename(columns=str.lower)[["open", "high", "low", "close"]]
    if close_factor is not None:
        prices = prices.assign(close=prices["close"] * close_factor(prices.index))
    features = pd.DataFrame({"log_return": np.log(prices["close"]).diff() * 10}, index=prices.index)
    return build_env_spec("sp500", prices, features, SMA_SPLITS, seeds_env_config(window_size=WINDOW), 252.0), prices


def _brute_force_sma_actions(close: pd.Series, decided_at) -> np.ndarray:
    """The crossover from pandas rolling means over every close up to each decision bar."""
    actions = []
    for timestamp in decided_at:
        known = close.loc[:timestamp]
        fast, slow = known.rolling(20).mean().iloc[-1], known.rolling(50).mean().iloc[-1]
        actions.append(0.0 if np.isnan(slow) else (1.0 if fast > slow else -1.0))
    return np.array(actions)


def _decision_bars(spec, split, rollout) -> pd.DatetimeIndex:
    index = spec.prices[split].index
    return index[rollout["bar_index"].to_numpy() - 1]  # decided at the close of the bar before the mark


def test_sma_baseline_is_warm_at_the_first_decision_of_a_split_and_matches_pandas():
    spec, prices = _sp500_spec()
    rollout = b.run_baselines(lambda: spec.make_env("validation", evaluation=True))["sma_crossover"]
    decided = _decision_bars(spec, "validation", rollout)
    assert decided[0] == prices.loc[SMA_SPLITS["validation"]["start"] :].index[0]  # the split's first bar
    assert (rollout["action_raw"] != 0).all()  # SMA(50) exists from the first decision on
    np.testing.assert_array_equal(rollout["action_raw"], _brute_force_sma_actions(prices["close"], decided))
    # Without the history (the split's own bars only) the first decisions would be 0.
    own = b.sma_crossover_signal(spec.prices["validation"]["close"].to_numpy())
    assert (own[WINDOW - 1 : WINDOW + 10] == 0).all()


def test_sma_baseline_decision_ignores_closes_after_its_bar():
    spec, _ = _sp500_spec()
    rollout = b.run_baselines(lambda: spec.make_env("validation", evaluation=True))["sma_crossover"]
    decided = _decision_bars(spec, "validation", rollout)
    cut = decided[60]
    changed_spec, _ = _sp500_spec(lambda index: np.where(index > cut, np.linspace(0.5, 1.5, len(index)), 1.0))
    changed = b.run_baselines(lambda: changed_spec.make_env("validation", evaluation=True))["sma_crossover"]
    np.testing.assert_array_equal(changed["action_raw"].iloc[:61], rollout["action_raw"].iloc[:61])
    assert not np.array_equal(changed["action_raw"], rollout["action_raw"])


def test_sma_baseline_is_warm_at_the_first_decision_of_a_walk_forward_fold():
    from helpers.walk_forward_calls import feature_section

    from trading_rl.evaluation.validation import folds as windows
    from trading_rl.phases import walk_forward as wf

    prices = (
        sp500.load()
        .loc["2011-01-01":"2018-12-31"]
        .rename(columns=str.lower)[["open", "high", "low", "close", "volume"]]
    )
    feature_params = feature_section({"features": {"garch": None}, "scaler": {"method": "robust", "clip": 5.0}})
    gap = wf.WalkForwardParams().with_gap(feature_params.features).gap_bars
    index = windows.tradable_index(prices, feature_params.features)
    fold = windows.make_folds(len(index), 500, 249, 249, gap, max_folds=2)[0]
    spec = windows.fold_env_spec("sp500", prices, fold, feature_params, seeds_env_config(window_size=WINDOW), 252.0)
    rollout = b.run_baselines(lambda: spec.make_env("test", evaluation=True))["sma_crossover"]
    decided = _decision_bars(spec, "test", rollout)
    assert decided[0] == index[fold.test_start]  # the first decision: at the window's first bar
    assert rollout["action_raw"].iloc[0] != 0
    np.testing.assert_array_equal(rollout["action_raw"], _brute_force_sma_actions(prices["close"], decided))

"""Steps per second of our trading env against two public trading envs, on the same S&P 500 bars.

    python benchmarks/env_throughput.py [--steps N] [--repeats R] [--seed S]

Every env gets the same number of steps of pre-drawn random actions in one process, resets whenever
an episode ends (terminated or truncated; reset time counts), and is called directly (no
``gym.make`` wrappers). Time is this process's CPU time (``time.process_time``), and the repeats
run round-robin over the envs with the best of ``--repeats`` reported, so load from other processes
on a shared machine distorts the ratios as little as possible.

- ours: ``ContinuousTradingEnv`` with the default config (window 10, 500-step episodes from random
  starts, smoothing, costs, position cap) on the project's scaled features;
- gym-anytrading ``StocksEnv`` (window 10, whole frame, its own two features);
- gym-trading-env ``TradingEnv`` (positions [0, 1], window 10, 500-step episodes, our features as
  its ``feature_*`` columns);
- a bare loop with the same long-only accounting and observation copy as ours, without the gym API
  or the info dict: the floor our step could reach in Python.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import time
import warnings

import numpy as np
import pandas as pd
from arch.data import sp500

from trading_rl.envs import ContinuousTradingEnv, EnvConfig


def load_market() -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """S&P 500 daily bars (lower-case columns) and scaled features without warm-up rows."""
    prices = sp500.load().rename(columns=str.lower)[["open", "high", "low", "close", "volume"]]
    try:
        from trading_rl.features import FeatureParams, apply_scaler, compute_features, fit_scaler
    except ImportError:
        log_close = np.log(prices["close"])
        features = pd.DataFrame(
            {
                "ret_1": log_close.diff(),
                "ret_5": log_close.diff(5),
                "ret_20": log_close.diff(20),
                "vol_20": log_close.diff().rolling(20).std(),
                "range": (prices["high"] - prices["low"]) / prices["close"],
                "volume_z": np.log(prices["volume"]).diff(),
            }
        ).dropna()
        scaled = (features - features.mean()) / features.std()
        source = "inline fallback features (trading_rl.features not importable)"
    else:
        features = compute_features(prices, FeatureParams()).dropna()
        scaled = apply_scaler(features, fit_scaler(features))
        source = "trading_rl.features.compute_features + fit_scaler/apply_scaler"
    return prices.loc[scaled.index], scaled.astype(np.float64), source


def run_gym(env, actions) -> tuple[float, int]:
    """CPU seconds for ``len(actions)`` steps, resetting at episode ends; also the number of resets."""
    env.reset(seed=0)
    resets = 0
    step = env.step
    start = time.process_time()
    for action in actions:
        _, _, terminated, truncated, _ = step(action)
        if terminated or truncated:
            env.reset()
            resets += 1
    return time.process_time() - start, resets


def run_bare_loop(prices: pd.DataFrame, features: pd.DataFrame, actions: np.ndarray) -> tuple[float, int]:
    """Our env's long-only accounting and observation in one flat loop (no gym API, no info dict)."""
    cfg = EnvConfig()
    window, length = cfg.window_size, cfg.episode_length
    opens = prices["open"].to_numpy(np.float64).tolist()
    closes = prices["close"].to_numpy(np.float64).tolist()
    matrix = np.ascontiguousarray(features.to_numpy(np.float32))
    rows = np.zeros((len(matrix), window * matrix.shape[1] + 5), dtype=np.float32)
    rows[window - 1 :, :-5] = (
        np.lib.stride_tricks.sliding_window_view(matrix, window, axis=0)
        .transpose(0, 2, 1)
        .reshape(len(matrix) - window + 1, -1)
    )
    k = rows.shape[1] - 5
    alpha = 2.0 / (cfg.smoothing_window + 1)
    commission, slippage, cap = cfg.commission_rate, cfg.slippage_rate, cfg.max_position_pct
    hold, min_value = cfg.hold_threshold, cfg.min_trade_value
    rng = np.random.default_rng(0)
    raw_actions = actions[:, 0].tolist()
    resets = 0

    def reset():
        t0 = int(rng.integers(window - 1, len(opens) - 1 - length + 1))
        return t0, t0 + length, cfg.initial_cash, 0.0, 0.0, cfg.initial_cash, 0.0, 0, 0

    start = time.process_time()
    t, end, cash, units, entry, equity, smoothed, steps, held = reset()
    total_reward = 0.0
    for raw in raw_actions:
        smoothed = alpha * raw + (1 - alpha) * smoothed if steps else raw
        if smoothed > hold:
            fill = opens[t + 1] * (1 + slippage)
            room = (cap * (cash + units * fill) - units * fill) / (fill * (1 + cap * commission))
            quantity = min(smoothed * cash / fill, cash / (fill * (1 + commission)), room)
            if quantity * fill >= min_value:
                entry = (units * entry + quantity * fill) / (units + quantity)
                cash = max(cash - quantity * fill * (1 + commission), 0.0)
                units += quantity
        elif smoothed < -hold and units > 0:
            fill = opens[t + 1] * (1 - slippage)
            quantity = units if (1 + smoothed) * units * fill < min_value else -smoothed * units
            if quantity * fill >= min_value:
                cash += quantity * fill * (1 - commission)
                units -= quantity
        t += 1
        close = closes[t]
        new_equity = cash + units * close
        total_reward += math.log(new_equity / equity)
        equity = new_equity
        steps += 1
        held = held + 1 if units > 0 else 0
        obs = rows[t].copy()
        obs[k] = units * close / equity
        obs[k + 1] = close / entry - 1 if units > 0 else 0.0
        obs[k + 2] = cash / equity
        obs[k + 3] = min(held / length, 1.0)
        obs[k + 4] = smoothed
        if t >= end:
            t, end, cash, units, entry, equity, smoothed, steps, held = reset()
            resets += 1
    return time.process_time() - start, resets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    # gym-trading-env turns every warning into an error at import; keep that inside its import.
    with warnings.catch_warnings():
        from gym_anytrading.envs import StocksEnv
        from gym_trading_env.environments import TradingEnv

    prices, features, source = load_market()
    rng = np.random.default_rng(args.seed)
    continuous_actions = rng.uniform(-1, 1, size=(args.steps, 1)).astype(np.float32)
    binary_actions = rng.integers(0, 2, size=args.steps).tolist()

    anytrading_df = prices.rename(columns={"close": "Close"})
    trading_env_df = prices.join(features.add_prefix("feature_"))
    candidates = {
        "ours: ContinuousTradingEnv": (
            lambda: ContinuousTradingEnv(prices, features, EnvConfig()),
            list(continuous_actions),
        ),
        "gym-anytrading StocksEnv": (
            lambda: StocksEnv(df=anytrading_df, window_size=10, frame_bound=(10, len(anytrading_df))),
            binary_actions,
        ),
        "gym-trading-env TradingEnv": (
            lambda: TradingEnv(
                df=trading_env_df,
                positions=[0, 1],
                windows=10,
                trading_fees=0.0003,
                max_episode_duration=500,
                verbose=0,
            ),
            binary_actions,
        ),
    }
    runners = {name: (lambda f=factory, a=actions: run_gym(f(), a)) for name, (factory, actions) in candidates.items()}
    runners["bare loop, same accounting"] = lambda: run_bare_loop(prices, features, continuous_actions)
    timings: dict[str, list[tuple[float, int]]] = {name: [] for name in runners}
    for _ in range(args.repeats):
        for name, runner in runners.items():
            timings[name].append(runner())
    results = {name: min(runs) for name, runs in timings.items()}

    ours = args.steps / results["ours: ContinuousTradingEnv"][0]
    print(
        f"env throughput, {dt.date.today().isoformat()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, python {platform.python_version()}"
    )
    print(
        f"data: arch.data.sp500, {len(prices)} bars after warm-up; features: {features.shape[1]} columns from {source}"
    )
    print(f"{args.steps} random-action steps per env, CPU time, best of {args.repeats} round-robin runs\n")
    print("| env | steps/s | resets | ours / env |\n|---|---:|---:|---:|")
    for name, (seconds, resets) in results.items():
        rate = args.steps / seconds
        print(f"| {name} | {rate:,.0f} | {resets} | {ours / rate:.2f} |")


if __name__ == "__main__":
    main()

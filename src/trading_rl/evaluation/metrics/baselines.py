"""Reference strategies every report compares an agent with, run through the same env and costs.

- ``buy_and_hold``: action +1 at every step. With the env's position cap (``max_position_pct``,
  15% by default) this is a *capped* long: it buys up to the cap on the first step and tops the
  position back up to the cap whenever a fall leaves room for at least ``min_trade_value``.
- ``buy_and_hold_full`` (metrics only, no rollout): the instrument's own close-to-close returns over
  the episode's bars, fully invested, no cap and no costs — the market line.
- ``cash``: the flat action (0; -1 for a long-only target-exposure action), never trades.
- ``random``: actions uniform on the action space, from a generator seeded per call.
- ``oracle`` / ``oracle_short`` (planted-edge markets only): the best causal policy given the
  market's true process (``oracle_policy``), long-only (the env's rule) and allowed to short.
- ``sma_crossover``: +1 while the fast SMA of closes is above the slow one, else -1 (0 while the
  slow SMA has too few bars). Decided at the env's current bar from closes up to that bar only.
  The SMAs run over the env's ``close_history`` — for envs from ``EnvSpec.make_env`` every bar
  before the split or fold start too — so they are warm from the first decision of a window.

The policies read ``bar_index``, ``close_prices``, ``close_history``, ``history_positions``,
``episode_bounds`` and ``config`` of the unwrapped env (``trading_rl.envs.TradingEnvBase``).
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

from trading_rl.data.synthetic import oracle_forecasts, oracle_target_exposure
from trading_rl.envs.continuous import trading_env
from trading_rl.evaluation.metrics.attribution import attribution_metrics, env_cost_rate, rollout_attribution
from trading_rl.evaluation.metrics.metrics import compute_metrics, json_ready, return_metrics
from trading_rl.evaluation.metrics.rollout import Policy, run_episode

BASELINE_NAMES = ("buy_and_hold", "cash", "random", "sma_crossover")
MARKET = "buy_and_hold_full"  # the market line: metrics (and tearsheet equity) only, no rollout
# Planted-edge markets only (data.synthetic): the best causal policy, long-only / allowed to short.
ORACLE, ORACLE_SHORT = "oracle", "oracle_short"


def constant_policy(action: float, action_space: gym.spaces.Box) -> Policy:
    """Always the same action (shaped and typed like the action space)."""
    fixed = np.full(action_space.shape, action, dtype=action_space.dtype)
    return lambda observation: fixed.copy()


def random_policy(action_space: gym.spaces.Box, seed: int | None) -> Policy:
    """Uniform actions on the box from a private generator: the same seed gives the same actions,
    whatever else draws random numbers in between."""
    rng = np.random.default_rng(seed)
    low, high = action_space.low.astype(np.float64), action_space.high.astype(np.float64)
    return lambda observation: rng.uniform(low, high).astype(action_space.dtype)


def simple_moving_average(close: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean of the last ``window`` closes at each bar, NaN for the first ``window - 1``."""
    close = np.asarray(close, dtype=np.float64)
    sma = np.full(close.shape, np.nan)
    if close.size >= window:
        sma[window - 1 :] = sliding_window_view(close, window).mean(axis=1)
    return sma


def sma_crossover_signal(close: np.ndarray, fast: int = 20, slow: int = 50) -> np.ndarray:
    """Action per bar: +1 where SMA(fast) > SMA(slow), -1 where not, 0 before SMA(slow) exists.

    Entry ``t`` depends on ``close[: t + 1]`` only.
    """
    if not 1 <= fast < slow:
        raise ValueError(f"need 1 <= fast < slow, got fast={fast}, slow={slow}")
    fast_sma, slow_sma = simple_moving_average(close, fast), simple_moving_average(close, slow)
    signal = np.where(fast_sma > slow_sma, 1.0, -1.0)
    signal[np.isnan(slow_sma)] = 0.0
    return signal


def sma_crossover_policy(close: np.ndarray, position: Callable[[], int], fast: int = 20, slow: int = 50) -> Policy:
    """Look up the crossover signal of ``close`` at the position of the bar the env is deciding on
    (``position()``)."""
    signal = sma_crossover_signal(close, fast, slow).astype(np.float32)
    return lambda observation: signal[position()].reshape(1)


def oracle_policy(env: gym.Env) -> Policy:
    """The best causal policy of a planted-edge market, through ``env``'s own action path.

    At each bar it forecasts the next return from the closes so far with the market's true
    parameters (``data.synthetic.oracle_forecasts``), picks a target position
    (``oracle_target_exposure``: the cap, flat or, where the env allows it, short; costs set its
    band), and emits the raw action whose *smoothed* value trades the portfolio to that target
    under the env's rule (trade fractions, hold zone, cap; or, with ``action_mode: target``, the
    target itself): it inverts the env's action EMA as far as the action bounds allow. Trading
    fractions, it holds within a quarter of the cap of its target.
    """
    base = trading_env(env, "the oracle baseline")
    model = base.market_model
    if model is None:
        raise ValueError("the oracle baseline needs an env of a synthetic market (EnvSpec.market_model)")
    config = base.config
    mean, variance = oracle_forecasts(base.close_history, model)
    positions, layout = base.history_positions, base.layout
    position_at, cash_at = layout.index("position_fraction"), layout.index("cash_fraction")
    last_action_at = layout.index("last_action")
    cap, target_mode, cost = config.max_position_pct, config.action_mode == "target", env_cost_rate(config)
    weight, band, smallest = base.action_smoothing_weight, 0.25 * cap, min(config.hold_threshold + 1e-6, 1.0)

    def act(observation: np.ndarray) -> np.ndarray:
        t = positions[base.bar_index]
        exposure, cash = float(observation[position_at]), float(observation[cash_at])
        target = oracle_target_exposure(mean[t], variance[t], exposure, model, cap, config.allow_short, cost)
        signal = 0.0
        if target_mode:  # the action is the position itself (EnvConfig.action_mode)
            signal = target / cap if config.allow_short else 2.0 * target / cap - 1.0
        elif target > exposure + band:
            if exposure < 0.0:  # cover (the env never flips a short to long in one step)
                signal = 1.0 if target >= 0.0 else (target - exposure) / -exposure
            else:
                signal = 1.0 if target >= cap else (target - exposure) / max(cash, 1e-12)
            signal = min(max(signal, smallest), 1.0)
        elif target < exposure - band:
            if exposure > 0.0:  # sell down (never flips to short in one step)
                signal = -1.0 if target <= 0.0 else -(exposure - target) / exposure
            else:
                signal = -1.0 if target <= -cap else -(exposure - target) / max(cash, 1e-12)
            signal = max(min(signal, -smallest), -1.0)
        first_decision = base.bar_index == base.episode_bounds[0]
        raw = signal if first_decision else (signal - (1.0 - weight) * float(observation[last_action_at])) / weight
        return np.array([min(max(raw, -1.0), 1.0)], dtype=np.float32)

    return act


def baseline_policies(env: gym.Env, seed: int | None, fast: int = 20, slow: int = 50) -> dict[str, Policy]:
    """The baseline policies bound to ``env`` (the SMA policy follows that env's current bar in its
    close history)."""
    base = trading_env(env, "the baselines")
    action_space = env.action_space
    if not isinstance(action_space, gym.spaces.Box):
        raise ValueError(f"the baselines need a Box action space, got {action_space}")
    positions = base.history_positions
    return {
        "buy_and_hold": constant_policy(1.0, action_space),
        "cash": constant_policy(base.flat_signal, action_space),
        "random": random_policy(action_space, seed),
        "sma_crossover": sma_crossover_policy(base.close_history, lambda: positions[base.bar_index], fast, slow),
    }


def run_baselines(
    make_env: Callable[..., gym.Env], seed: int = 0, fast: int = 20, slow: int = 50
) -> dict[str, pd.DataFrame]:
    """One rollout per baseline, each on a fresh env from ``make_env`` reset with ``seed``. On a
    planted-edge market also the oracle (``ORACLE``, the env's own shorting rule) and the oracle
    allowed to short (``ORACLE_SHORT``, on ``make_env(allow_short=True)``)."""
    rollouts = {}
    for name in BASELINE_NAMES:
        env = make_env()
        rollouts[name] = run_episode(env, baseline_policies(env, seed, fast, slow)[name], seed=seed)
    if trading_env(env, "run_baselines").market_model is not None:
        for name, overrides in ((ORACLE, {}), (ORACLE_SHORT, {"allow_short": True})):
            oracle_env = make_env(**overrides)
            rollouts[name] = run_episode(oracle_env, oracle_policy(oracle_env), seed=seed)
    return rollouts


def market_returns(env: gym.Env, seed: int | None = 0) -> np.ndarray:
    """Close-to-close returns over the bars of the episode ``env`` runs after ``reset(seed)``: the
    steps' equity is marked at ``close[start + 1] .. close[end]`` from ``close[start]``."""
    base = trading_env(env, "market_returns")
    env.reset(seed=seed)
    start, end = base.episode_bounds
    closes = base.close_prices[start : end + 1]
    return closes[1:] / closes[:-1] - 1.0


def evaluate_baselines(
    make_env: Callable[[], gym.Env], periods_per_year: float, seed: int = 0, fast: int = 20, slow: int = 50
) -> dict[str, dict]:
    """Metrics (``compute_metrics``) and return attribution (``attribution.attribution_metrics``,
    against the market line) of every baseline, plus ``buy_and_hold_full`` (price returns only: the
    return/risk keys of ``return_metrics``, no trade, action or attribution keys)."""
    reference_env = make_env()
    config = trading_env(reference_env, "evaluate_baselines").config
    market = market_returns(reference_env, seed)
    results = {
        name: {
            **compute_metrics(rollout, periods_per_year, config.hold_threshold),
            **attribution_metrics(
                rollout_attribution(rollout, market, periods_per_year=periods_per_year, cost_rate=env_cost_rate(config))
            ),
        }
        for name, rollout in run_baselines(make_env, seed, fast, slow).items()
    }
    results[MARKET] = json_ready(return_metrics(market, periods_per_year))
    return results

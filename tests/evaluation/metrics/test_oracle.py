"""The oracle baseline through the env: its positions on a tiny planted-edge market follow a hand
computation from the closes; it inverts the env's action smoothing; it appears wherever baselines run."""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
import pytest

from trading_rl.data.synthetic import MarketModel, synthetic_prices
from trading_rl.envs import EnvConfig, EnvSpec, build_env_spec
from trading_rl.evaluation.metrics.baselines import (
    ORACLE,
    ORACLE_SHORT,
    evaluate_baselines,
    oracle_policy,
    run_baselines,
)
from trading_rl.evaluation.metrics.rollout import run_episode

MARKET = MarketModel.from_mapping({"family": "fast", "strength": 0.3, "n_bars": 160, "seed": 5}, "market")
ENV = {
    "action_mode": "trade",
    "window_size": 2,
    "commission_rate": 0.0002,
    "slippage_rate": 0.0001,
    "max_position_pct": 0.15,
}


def tiny_spec(smoothing_window: int, market: MarketModel | None = MARKET) -> EnvSpec:
    prices = synthetic_prices(MARKET)
    features = pd.DataFrame({"logret_1": np.log(prices["close"]).diff().fillna(0.0)}, index=prices.index)
    return build_env_spec(
        "tiny",
        prices,
        features,
        {"test": {"start": str(prices.index[0].date()), "end": str(prices.index[-1].date())}},
        EnvConfig.from_mapping({**ENV, "smoothing_window": smoothing_window}),
        periods_per_year=252.0,
        market_model=market,
    )


def hand_positions(closes: np.ndarray, first_bar: int) -> list[bool]:
    """Long (True) or flat after each step, from the closes alone: long-only, fast family, costs
    3 bp one way spread over the forecast's 1 / (1 - 0.3) bars."""
    mu = 0.05 / 252
    band = 3e-4 * (1 - 0.3)
    long, states = False, []
    for t in range(first_bar, len(closes) - 1):
        r = np.log(closes[t] / closes[t - 1])
        mean = mu + 0.3 * (r - mu)
        long = mean > -band if long else mean > band
        states.append(long)
    return states


def test_oracle_positions_follow_the_hand_computation_without_smoothing():
    spec = tiny_spec(smoothing_window=1)
    env = spec.make_env("test", evaluation=True)
    rollout = run_episode(env, oracle_policy(env))
    closes = spec.prices["test"]["close"].to_numpy()
    expected = hand_positions(closes, first_bar=env.unwrapped.first_tradable_bar)
    assert (rollout["position"].to_numpy() > 0).tolist() == expected
    assert 10 < sum(expected) < len(expected) - 10  # the market makes it trade both ways
    # Every entry goes to the cap (15% of equity at the fill), every exit sells everything.
    entries = rollout[rollout["action_type"] == "buy"]
    value_share = entries["trade_value"] / (entries["equity"] + entries["fees"])
    assert value_share.between(0.145, 0.151).all()


def test_oracle_inverts_the_action_smoothing():
    spec = tiny_spec(smoothing_window=3)
    env = spec.make_env("test", evaluation=True)
    rollout = run_episode(env, oracle_policy(env))
    smoothed, kind = rollout["action_smoothed"].to_numpy(), rollout["action_type"].to_numpy()
    # Where it wants no trade the EMA is brought back to exactly 0, so the next decision is free;
    # only a raw action at its bound (a turn the EMA cannot make in one step) leaves it elsewhere.
    holds = (kind == "hold") & (np.abs(rollout["action_raw"].to_numpy()) < 1.0)
    assert holds.sum() > 20 and np.allclose(smoothed[holds], 0.0, atol=1e-6)
    assert (kind == "buy").sum() >= 5 and (kind == "sell").sum() >= 5
    # Through the smoothing it still trades to the cap when it enters.
    assert (rollout.loc[kind == "buy", "trade_value"] > 0).all()


def test_oracles_join_the_baselines_only_on_synthetic_markets():
    spec = tiny_spec(smoothing_window=1)
    rollouts = run_baselines(partial(spec.make_env, "test", evaluation=True), seed=0)
    assert {ORACLE, ORACLE_SHORT} <= set(rollouts)
    assert (rollouts[ORACLE_SHORT]["position"] < 0).any() and (rollouts[ORACLE]["position"] >= 0).all()
    metrics = evaluate_baselines(partial(spec.make_env, "test", evaluation=True), 252.0)
    assert metrics[ORACLE]["sharpe"] > metrics["buy_and_hold"]["sharpe"]
    real = tiny_spec(smoothing_window=1, market=None)
    assert ORACLE not in run_baselines(partial(real.make_env, "test", evaluation=True), seed=0)
    with pytest.raises(ValueError, match="synthetic market"):
        oracle_policy(real.make_env("test", evaluation=True))


def test_market_model_survives_the_spec_archive_and_leaves_real_specs_unchanged():
    spec = tiny_spec(smoothing_window=1)
    restored = EnvSpec.from_bytes(spec.to_bytes())
    assert restored.market_model == MARKET
    assert restored.make_env("test").market_model == MARKET
    real = tiny_spec(smoothing_window=1, market=None)
    assert "market_model" not in EnvSpec.from_bytes(real.to_bytes())._fields()
    assert real.digest() != spec.digest()


def test_walk_forward_on_a_synthetic_symbol_reports_both_oracles_per_window():
    from helpers.walk_forward_calls import job, section

    from trading_rl.data.frames import by_symbol
    from trading_rl.data.selection import SymbolEntry, load_validated_prices
    from trading_rl.phases import walk_forward as wf
    from trading_rl.phases.walk_forward import PolicyAgent

    def trainer(spec, params, seed, timesteps, model=None, device="auto"):
        return model or PolicyAgent(_Holder())

    entry = {"name": "F", "source": "synthetic", "market": {"family": "fast", "strength": 0.3, "n_bars": 700}}
    feature_params = {"symbols": [entry], "features": {"garch": None}}
    prices = by_symbol(load_validated_prices([SymbolEntry.from_mapping(entry)], {}, 250))
    wf.AGENT_TRAINERS["constant"] = trainer
    try:
        result = wf.run_walk_forward(
            prices,
            section(
                {
                    "train_length": 250,
                    "test_length": 100,
                    "step": 100,
                    "max_folds": 2,
                    "seeds": 1,
                    "agents": ["constant"],
                    "timesteps": 1,
                    "finetune_timesteps": 0,
                    "data_end": "all",
                }
            ),
            job(feature_params, {"window_size": 5}, {"F": 252.0}, {"constant": {}}, 0),
        )
    finally:
        del wf.AGENT_TRAINERS["constant"]
    baselines = result.folds[result.folds["kind"] == "baseline"]
    assert (baselines.groupby("agent").size()[[ORACLE, ORACLE_SHORT]] == 2).all()
    oracle = baselines[baselines["agent"] == ORACLE]
    assert (oracle["n_trades"] > 0).all()


class _Holder:
    """A stand-in agent that holds cash."""

    def predict(self, observation, deterministic=True):
        return np.zeros(1, dtype=np.float32), None


def test_feature_extraction_and_env_construction_carry_a_synthetic_market_to_the_oracle():
    """The Kedro nodes' path: a `source: synthetic` symbol is generated, validated and featured like
    any other; its env spec carries the market, so the phase reports' baselines include the oracle."""
    from helpers.wired import wired_functions

    from trading_rl.pipelines.env_construction.pipeline import create_pipeline as env_construction
    from trading_rl.pipelines.feature_extraction.pipeline import create_pipeline as feature_extraction

    params = {
        "symbols": [{"name": "S", "source": "synthetic", "market": {"family": "slow", "strength": 0.3, "n_bars": 900}}],
        "splits": {"train_fraction": 0.6, "validation_fraction": 0.2},
        "features": {"garch": None},
    }
    node = wired_functions(feature_extraction(), env_construction())
    prices = node["load_and_validate_prices"]({}, params)
    splits = node["define_splits"](prices, params)
    feature_params = node["fit_feature_params"](prices, splits, params)
    features = node["build_features"](prices, feature_params)
    scalers = node["fit_scalers"](features, prices, splits, params)
    scaled = node["scale_features"](features, scalers)
    spec = node["build_env_spec"](prices, scaled, splits, {"symbol": "S", "env": {}}, scalers, params)
    assert spec.market_model is not None and spec.market_model.family == "slow"
    metrics = evaluate_baselines(partial(spec.make_env, "validation", evaluation=True), spec.periods_per_year)
    assert {ORACLE, ORACLE_SHORT} <= set(metrics)

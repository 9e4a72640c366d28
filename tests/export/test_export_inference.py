"""SignalEngine: the env's observation and decisions from raw bars, and clear errors on bad input."""

import dataclasses

import numpy as np
import pytest
from helpers.served_model import next_portfolio_state

from trading_rl.export import PortfolioState, SignalEngine, inference_session


@pytest.fixture(scope="module")
def engine(export_setup, onnx_bytes):
    spec = export_setup.spec
    return SignalEngine(onnx_bytes, export_setup.feature_params, export_setup.scaler, spec.config, spec.feature_columns)


@pytest.mark.slow
def test_signals_equal_the_env_driven_by_the_onnx_policy_over_the_validation_split(export_setup, engine, onnx_bytes):
    spec = export_setup.spec
    env = spec.make_env("validation")
    session = inference_session(onnx_bytes)
    observation, info = env.reset()
    state = PortfolioState(cash=info["cash"])
    kinds, trades = set(), 0
    done, steps = False, 0
    while not done:
        t = env.bar_index
        bars = export_setup.prices.loc[: spec.prices["validation"].index[t]]
        np.testing.assert_array_equal(engine.observation(bars, state), observation)
        signal = engine.signal(bars, state, reference_price=env.open_prices[t + 1])
        (action,) = session.run(["action"], {"observation": observation[None, :]})
        observation, _, terminated, truncated, info = env.step(action[0])
        done = terminated or truncated
        assert signal.raw_action == info["action_raw"]
        assert signal.smoothed_action == info["action_smoothed"]
        assert (signal.kind, signal.skipped) == (info["action_type"], info["skipped"])
        assert signal.units == info["trade_units"]
        assert signal.fill_price == info["fill_price"]
        kinds.add(signal.kind)
        trades += signal.trades
        state = next_portfolio_state(state, info)
        steps += 1
    assert steps == len(spec.prices["validation"]) - spec.layout.window_size
    # The comparison went through holds, buys, sells and fills (entry price, time in position).
    assert kinds == {"hold", "buy", "sell"} and trades >= 5


def test_first_decision_is_not_smoothed_and_later_ones_are(export_setup, engine):
    bars = export_setup.prices
    first = engine.signal(bars, PortfolioState(**{"cash": 1e5}))
    assert first.smoothed_action == first.raw_action
    later = engine.signal(bars, PortfolioState(**{"cash": 1e5, "last_action": 0.5}))
    alpha = 2.0 / (export_setup.spec.config.smoothing_window + 1.0)
    assert later.smoothed_action == pytest.approx(alpha * later.raw_action + (1 - alpha) * 0.5)


def test_engine_loads_the_model_from_a_path(export_setup, engine, onnx_bytes, tmp_path):
    path = tmp_path / "actor.onnx"
    path.write_bytes(onnx_bytes)
    spec = export_setup.spec
    from_path = SignalEngine(path, export_setup.feature_params, export_setup.scaler, spec.config, spec.feature_columns)
    state = PortfolioState(cash=5e4, position=20.0, entry_price=2600.0, time_in_position=7, last_action=-0.4)
    assert from_path.signal(export_setup.prices, state) == engine.signal(export_setup.prices, state)


def test_too_few_bars_is_a_missing_bars_error(export_setup, engine):
    bars = export_setup.prices.iloc[: engine.min_bars - 1]
    with pytest.raises(ValueError, match=f"missing bars: {engine.min_bars - 1} given.*at least {engine.min_bars}"):
        engine.signal(bars, PortfolioState(**{"cash": 1e5}))


def test_nan_in_bars_names_column_and_timestamp(export_setup, engine):
    bars = export_setup.prices.copy()
    bars.iloc[-3, bars.columns.get_loc("close")] = np.nan
    with pytest.raises(ValueError, match=rf"NaN/inf in column\(s\) \['close'\].*{bars.index[-3]}"):
        engine.signal(bars, PortfolioState(**{"cash": 1e5}))


def test_a_non_positive_price_or_an_unsorted_index_is_named(export_setup, engine):
    """What ``compute_features`` refused when the engine built a DataFrame of features; the engine
    now checks it itself, once, before its NumPy features."""
    bars = export_setup.prices.copy()
    bars.iloc[-2, bars.columns.get_loc("low")] = 0.0
    with pytest.raises(ValueError, match=rf"bars column 'low' must be > 0 at {bars.index[-2]}"):
        engine.signal(bars, PortfolioState(cash=1e5))
    with pytest.raises(ValueError, match="bars index must be sorted"):
        engine.signal(export_setup.prices.iloc[::-1], PortfolioState(cash=1e5))


def test_wrong_feature_count_is_named(export_setup, engine, onnx_bytes):
    spec = export_setup.spec
    with pytest.raises(ValueError, match="wrong feature count: feature_params produce 24 columns"):
        SignalEngine(
            onnx_bytes,
            dataclasses.replace(export_setup.feature_params, calendar=False),
            export_setup.scaler,
            spec.config,
            spec.feature_columns,
        ).signal(export_setup.prices, PortfolioState(cash=1e5))
    with pytest.raises(ValueError, match="wrong feature count: the ONNX model takes observations of 109"):
        SignalEngine(
            onnx_bytes,
            export_setup.feature_params,
            export_setup.scaler,
            dataclasses.replace(spec.config, window_size=5),
            spec.feature_columns,
        )
    with pytest.raises(ValueError, match=r"wrong feature count: observation has shape \(108,\)"):
        engine.action(np.zeros(108, dtype=np.float32))


def test_bad_portfolio_is_named():
    with pytest.raises(ValueError, match="unknown portfolio key"):
        PortfolioState.from_mapping({"cash": 1e5, "units": 3})
    with pytest.raises(ValueError, match="'cash' must be finite"):
        PortfolioState.from_mapping({"cash": float("nan")})
    assert PortfolioState.from_mapping({"cash": 1e5, "last_action": 0.5}) == PortfolioState(1e5, last_action=0.5)


def test_the_inference_config_is_read_into_typed_sections_and_a_bad_one_is_named(export_setup, onnx_bytes):
    spec = export_setup.spec
    config = {
        "feature_params": export_setup.feature_params.to_dict(),
        "scaler": export_setup.scaler,
        "env_config": spec.config_data(),
        "feature_columns": spec.feature_columns,
    }
    engine = SignalEngine.from_inference_config(onnx_bytes, config)
    assert engine.config == spec.config and engine.feature_params == export_setup.feature_params
    with pytest.raises(ValueError, match=r"'inference_config\.env_config\.hold_treshold'"):
        SignalEngine.from_inference_config(onnx_bytes, {**config, "env_config": {"hold_treshold": 0.1}})
    with pytest.raises(ValueError, match=r"'inference_config\.feature_params\.rsi_window' must be"):
        SignalEngine.from_inference_config(onnx_bytes, {**config, "feature_params": {"rsi_window": "14"}})

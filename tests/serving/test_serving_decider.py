"""The served model's decisions without HTTP: the package, the state across requests (time order, a
retried bar, the safeguards), the decision log, the env's target mode, and the versions the served
model is pinned to."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pandas as pd
import pytest
from helpers.export_setup import SPLITS
from helpers.served_model import BUYER, buying_bars, next_portfolio, request_for

from trading_rl.envs import build_env_spec
from trading_rl.export import PortfolioState, SignalEngine, inference_session
from trading_rl.features import apply_scaler, compute_features
from trading_rl.integration.mlflow_tracking import SERVED_REQUIREMENTS, pinned
from trading_rl.serving import Decider, DecisionLog, RequestError, feature_params_digest
from trading_rl.serving.decision_log import DECISION_LOG_ENV, DEFAULT_DECISION_LOG

ROOT = Path(__file__).resolve().parents[2]


def _decider(setup, safeguards=None, log=None) -> Decider:
    config = setup.package.config
    if safeguards is not None:
        config = {**config, "safeguards": safeguards}
    return Decider(setup.package.onnx, config, DecisionLog(log))


def test_the_package_states_what_requests_are_checked_against(serving_setup):
    config = serving_setup.package.config
    assert config["min_bars"] == 64 and config["bar_interval_seconds"] == 86400.0 and config["timezone"] is None
    assert config["model_version"] == "2030-01-01T00.00.00.000Z" and config["source_dataset"] == "sac_icm_model"
    assert config["feature_params_digest"] == feature_params_digest(config)
    example = serving_setup.package.example
    first_decision = serving_setup.spec.prices["validation"].index[3]  # window 4: the env's first tradable bar
    assert example["bars"]["timestamp"] == [
        stamp.isoformat() for stamp in serving_setup.prices.loc[:first_decision].index
    ]
    assert example["portfolio"] == {"cash": 100_000.0, "position": 0.0, "last_action": None}


def test_the_example_request_is_the_envs_first_decision_of_the_validation_split(serving_setup):
    response = _decider(serving_setup).decide(serving_setup.package.example)
    env = serving_setup.spec.make_env("validation")
    observation, _ = env.reset()
    (action,) = inference_session(serving_setup.onnx).run(["action"], {"observation": observation[None, :]})
    _, _, _, _, info = env.step(action[0])
    assert (response["raw_action"], response["smoothed_action"]) == (info["action_raw"], info["action_smoothed"])
    assert response["policy"]["kind"] == info["action_type"]


def test_a_config_edited_after_it_was_built_is_refused(serving_setup):
    edited = copy.deepcopy(serving_setup.package.config)
    edited["feature_params"]["rsi_window"] = 7
    with pytest.raises(ValueError, match="feature_params_digest .* does not match"):
        Decider(serving_setup.package.onnx, edited, DecisionLog(None))


def test_a_decision_is_the_signal_engines_and_is_logged(serving_setup, tmp_path):
    decider, prices = _decider(serving_setup, log=tmp_path / "decisions.jsonl"), serving_setup.prices
    response = decider.decide(request_for(prices, {"cash": 50_000.0, "position": 10.0, "entry_price": 2500.0}))
    engine = SignalEngine.from_inference_config(serving_setup.onnx, serving_setup.package.config)
    signal = engine.signal(prices, PortfolioState(50_000.0, 10.0, 2500.0))
    assert (response["raw_action"], response["smoothed_action"]) == (signal.raw_action, signal.smoothed_action)
    assert (response["policy"]["kind"], response["policy"]["units"]) == (signal.kind, signal.units)
    assert response["timestamp"] == prices.index[-1].isoformat() and decider.last_bar == prices.index[-1]
    (line,) = (tmp_path / "decisions.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert entry["status"] == "decided" and entry["decision"] == 1 and entry["latency_ms"] > 0
    assert entry["bars"] == {"n": 600, "first": prices.index[0].isoformat(), "last": prices.index[-1].isoformat()}
    assert entry["portfolio"]["position"] == 10.0 and entry["raw_action"] == response["raw_action"]


def test_a_retried_bar_is_decided_again_without_counting_its_trade_twice(serving_setup):
    decider = _decider(serving_setup, safeguards={"max_trades_per_day": 1})
    bars = buying_bars(serving_setup, decider)
    first = decider.decide(request_for(bars, BUYER))
    assert first["safeguard"]["verdict"] == "passed" and first["signal"]["action"] == "BUY"
    # The same bar again (a retry): decided from the safeguards' state before its first decision, so
    # the day's one trade is not spent twice.
    assert decider.decide(request_for(bars, BUYER)) == first
    with pytest.raises(RequestError, match="older than the latest bar already decided"):
        decider.decide(request_for(bars.iloc[:-1], BUYER))


def test_a_second_trade_on_a_day_is_blocked_with_its_rule(serving_setup):
    """Two decisions on one calendar day: the last bar, then the same bar an hour later."""
    decider = _decider(serving_setup, safeguards={"max_trades_per_day": 1})
    bars = buying_bars(serving_setup, decider)
    assert decider.decide(request_for(bars, BUYER))["safeguard"]["verdict"] == "passed"
    later = bars.copy()
    later.index = later.index[:-1].append(later.index[-1:] + pd.Timedelta(hours=1))
    response = decider.decide(request_for(later, BUYER))
    assert response["safeguard"] == {
        "verdict": "blocked",
        "rule": "max_trades_per_day",
        "reason": f"1 trades already on {bars.index[-1].date()}",
    }
    assert response["signal"]["action"] == "HOLD" and response["signal"]["units"] == 0.0
    assert response["policy"]["units"] > 0.0 and response["target_position"] == 0.0


def test_a_trade_below_the_confidence_floor_is_a_hold_with_the_rule(serving_setup):
    decider = _decider(serving_setup, safeguards={"min_confidence": 1.0})
    response = decider.decide(request_for(buying_bars(serving_setup, decider), BUYER))
    assert response["safeguard"]["rule"] == "min_confidence" and response["signal"]["order_type"] is None


def test_the_decision_log_path(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(DECISION_LOG_ENV, raising=False)
    assert DecisionLog.configured().path == tmp_path / DEFAULT_DECISION_LOG
    monkeypatch.setenv(DECISION_LOG_ENV, "logs/d.jsonl")
    assert DecisionLog.configured().path == tmp_path / "logs/d.jsonl"
    monkeypatch.setenv(DECISION_LOG_ENV, "")
    assert DecisionLog.configured().path is None


def test_target_mode_signals_rebalance_as_the_env_does(serving_setup):
    """``action_mode: target``: the smoothed action is the position to hold (``Portfolio.rebalance``),
    over the whole validation split."""
    setup = serving_setup
    config = dataclasses.replace(setup.spec.config, action_mode="target")
    features = apply_scaler(compute_features(setup.prices, setup.feature_params).dropna(how="any"), setup.scaler)
    spec = build_env_spec("sp500", setup.prices, features, SPLITS, config, 252.0)
    engine = SignalEngine(setup.onnx, setup.feature_params, setup.scaler, config, spec.feature_columns)
    env, session = spec.make_env("validation"), inference_session(setup.onnx)
    observation, info = env.reset()
    portfolio, done, kinds = {"cash": info["cash"]}, False, set()
    while not done:
        t = env.bar_index
        bars = setup.prices.loc[: spec.prices["validation"].index[t]]
        signal = engine.signal(bars, PortfolioState(**portfolio), reference_price=env.open_prices[t + 1])
        (action,) = session.run(["action"], {"observation": observation[None, :]})
        observation, _, terminated, truncated, info = env.step(action[0])
        done = terminated or truncated
        assert (signal.kind, signal.skipped, signal.units, signal.fill_price, signal.fee) == (
            info["action_type"],
            info["skipped"],
            info["trade_units"],
            info["fill_price"],
            info["fees"],
        )
        kinds.add(signal.kind)
        portfolio = next_portfolio(portfolio, info)
    assert {"buy", "sell"} <= kinds


def _names(requirements) -> set[str]:
    return {re.match(r"[\w.-]+", line).group(0).lower().replace("_", "-") for line in requirements}


@pytest.mark.slow  # a fresh interpreter imports torch and MLflow: seconds
def test_the_served_model_pins_every_dependency_its_code_imports_at_the_projects_versions():
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, trading_rl.serving.pyfunc, onnxruntime\n"
            "from importlib.metadata import packages_distributions as d\n"
            "names = d()\n"
            "print('\\n'.join(sorted({x for m in list(sys.modules) for x in names.get(m.split('.')[0], [])})))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert (_names(dependencies) & _names(imported)) == _names(SERVED_REQUIREMENTS)
    pins = {
        name.lower(): pin
        for name, pin in (
            re.match(r"([\w.-]+)(?:\[[^\]]*\])?==([\w.]+)", line).groups() for line in dependencies if "==" in line
        )
    }
    for requirement in pinned(SERVED_REQUIREMENTS):
        name, _, pin = requirement.partition("==")
        assert pin == version(name) == pins.get(name, pin), requirement


def test_an_example_over_the_size_limit_keeps_the_latest_bars_that_fit(serving_setup):
    from trading_rl.monitoring.alerting import AlertingParams
    from trading_rl.serving import ServingParams, served_package
    from trading_rl.serving.request import request_size

    setup, limit = serving_setup, 20_000
    package = served_package(
        setup.onnx,
        setup.package.config,
        setup.prices,
        setup.prices.index[-1],
        "v",
        "m",
        ServingParams(max_request_bytes=limit),
        AlertingParams(),
    )
    bars = package.example["bars"]["timestamp"]
    assert request_size(package.example) <= limit and 64 <= len(bars) < len(setup.prices)
    assert bars[-1] == setup.prices.index[-1].isoformat()


def test_the_size_limit_holds_to_the_byte_without_writing_every_float(serving_setup):
    """The bound that spares formatting the floats never undercounts (the longest float text
    included); at the bound or above it the size is measured exactly."""
    from trading_rl.serving.package import request_limits
    from trading_rl.serving.request import _size_bound, parse_request, request_size

    request = request_for(serving_setup.prices)
    size = request_size(request)
    limits = request_limits(serving_setup.package.config)
    assert (
        parse_request(request, dataclasses.replace(limits, max_request_bytes=size)).index[-1]
        == (serving_setup.prices.index[-1])
    )
    with pytest.raises(RequestError, match=f"body: {size} bytes as compact JSON, over the limit of {size - 1}"):
        parse_request(request, dataclasses.replace(limits, max_request_bytes=size - 1))
    longest = copy.deepcopy(request)
    longest["bars"]["close"] = [-2.2250738585072014e-308, -1.2345678901234567e300, float("nan")] * 200
    assert request_size(request) <= _size_bound(request) and request_size(longest) <= _size_bound(longest)

"""The served model decides as the env does: over the whole validation split, its HTTP responses
equal the env driven by the same (ONNX) policy, and on a deployed model's forward bars they equal
the forward pipeline's record of the same bars."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers.served_model import Server, next_portfolio, request_for

from trading_rl.export import inference_session


def _check_signal(response: dict) -> None:
    """The executable signal follows the policy's decision and the safeguard verdict."""
    policy, signal, verdict = response["policy"], response["signal"], response["safeguard"]["verdict"]
    if verdict == "passed":
        assert (signal["action"], signal["units"]) == (policy["kind"].upper(), abs(policy["units"]))
    else:
        assert (signal["action"], signal["units"], signal["order_type"]) == ("HOLD", 0.0, None)
    assert response["confidence"] == abs(response["raw_action"])


@pytest.mark.slow
def test_responses_equal_the_env_driven_by_the_served_policy_over_the_validation_split(serving_setup, server):
    spec, prices = serving_setup.spec, serving_setup.prices
    env = spec.make_env("validation")
    session = inference_session(serving_setup.onnx)
    observation, info = env.reset()
    portfolio: dict = {"cash": info["cash"]}
    kinds, trades, steps, done = set(), 0, 0, False
    while not done:
        t = env.bar_index
        bars = prices.loc[: spec.prices["validation"].index[t]]  # the history from the pipeline's first bar
        status, body = server.post({"inputs": [request_for(bars, portfolio, reference_price=env.open_prices[t + 1])]})
        assert status == 200, body
        (response,) = body["predictions"]
        (action,) = session.run(["action"], {"observation": observation[None, :]})
        observation, _, terminated, truncated, info = env.step(action[0])
        done = terminated or truncated
        policy = response["policy"]
        assert (response["raw_action"], response["smoothed_action"]) == (info["action_raw"], info["action_smoothed"])
        assert (policy["kind"], policy["skipped"]) == (info["action_type"], info["skipped"])
        assert (policy["units"], policy["fill_price"], policy["fee"]) == (
            info["trade_units"],
            info["fill_price"],
            info["fees"],
        )
        assert response["timestamp"] == bars.index[-1].isoformat()
        _check_signal(response)
        kinds.add(policy["kind"])
        trades += policy["units"] != 0.0
        portfolio = next_portfolio(portfolio, info)
        steps += 1
    assert steps == len(spec.prices["validation"]) - spec.layout.window_size
    assert kinds == {"hold", "buy", "sell"} and trades >= 5  # through holds, buys, sells and fills
    assert server.decider.last_bar == spec.prices["validation"].index[-2]


def _widened(train):
    """``train`` with the deployed actor's mean action spread (x6, centred): the tiny agent alone only
    holds on these bars, and the comparison must go through buys and sells."""

    def widened(*args, **kwargs):
        import torch

        model, best, history = train(*args, **kwargs)
        with torch.no_grad():
            mu = model.policy.actor.mu
            mu.weight.mul_(6.0)
            mu.bias.mul_(6.0).add_(0.6)
        return model, best, history

    return widened


@pytest.mark.slow
def test_responses_equal_the_forward_record_of_the_deployed_model(tmp_path, monkeypatch):
    """A tiny agent deployed on a synthetic file, 40 bars appended, one scheduled forward rerun: the
    served model (built from the deployed model as the export pipeline builds it) decides each
    forward bar as the record has it. The record is the PyTorch policy's, the served model the ONNX
    actor's: actions agree within the export's parity tolerance (1e-5), kinds and fills exactly."""
    import helpers.forward_setup
    from helpers.forward_setup import MODEL_DATASET, SYMBOL, TRAINED_BARS, deploy, market, rerun, write_prices
    from kedro.io.core import Version

    from trading_rl.data import load_prices
    from trading_rl.envs.deployment import Deployment
    from trading_rl.evaluation.metrics.rollout import policy_from_sb3
    from trading_rl.export import export_actor
    from trading_rl.integration.datasets import SB3ModelDataset
    from trading_rl.integration.mlflow_tracking import save_served_model
    from trading_rl.monitoring.alerting import AlertingParams
    from trading_rl.phases.forward import FORWARD_SPLIT, forward_data
    from trading_rl.serving import ServingParams, served_package

    monkeypatch.setattr(helpers.forward_setup, "train_sac_icm", _widened(helpers.forward_setup.train_sac_icm))
    root, deployed, scored = tmp_path / "forward", "2026-01-31T06.00.00.000Z", "2026-02-01T06.00.00.000Z"
    write_prices(root, market(TRAINED_BARS))
    deploy(root, deployed)
    write_prices(root, market(TRAINED_BARS + 40))
    rerun(root, scored)
    (record_file,) = (root / "data/07_model_output/forward_record.parquet").glob("*/forward_record.parquet")
    record = pd.read_parquet(record_file)
    assert len(record) == 40

    model = SB3ModelDataset(
        str(root / MODEL_DATASET["filepath"]),
        MODEL_DATASET["model_class"],
        device="cpu",
        version=Version(deployed, None),
    ).load()
    deployment = Deployment.from_model(model)
    prices = load_prices(SYMBOL, source="file", path=root / f"data/01_raw/prices/{SYMBOL}.csv")
    data = forward_data(deployment, prices, "the synthetic file")
    block = model.trading_rl_metadata["deployment"]
    config = {
        "symbol": SYMBOL,
        "feature_params": block["feature_params"],
        "scaler": block["feature_scaler"],
        "env_config": data.spec.config_data(),
        "feature_columns": list(data.spec.feature_columns),
        "safeguards": {},
    }
    package = served_package(
        export_actor(model),
        config,
        prices,
        deployment.data_end,
        deployed,
        "sac_icm_model",
        ServingParams(),
        AlertingParams(),
    )
    save_served_model(package, tmp_path / "served")
    server = Server(tmp_path / "served", tmp_path / "decisions.jsonl")
    try:
        env, policy = data.make_env(), policy_from_sb3(model)  # the record's replay, step by step
        observation, info = env.reset()
        portfolio: dict = {"cash": info["cash"]}
        for row in record.itertuples():
            t = env.bar_index
            bars = prices.loc[: data.spec.prices[FORWARD_SPLIT].index[t]]
            request = request_for(bars, portfolio, reference_price=env.open_prices[t + 1], symbol=SYMBOL)
            status, body = server.post({"inputs": [request]})
            assert status == 200, body
            (response,) = body["predictions"]
            observation, _, _, _, info = env.step(policy(observation))
            assert pd.Timestamp(info["timestamp"]) == row.timestamp
            assert (info["position"], info["cash"], info["action_raw"]) == (row.position, row.cash, row.action_raw)
            assert response["raw_action"] == pytest.approx(row.action_raw, abs=1e-5)
            assert response["smoothed_action"] == pytest.approx(row.action_smoothed, abs=1e-5)
            assert response["policy"]["kind"] == info["action_type"]
            assert response["policy"]["units"] == pytest.approx(info["trade_units"], rel=1e-4, abs=1e-9)
            assert response["policy"]["fill_price"] == info["fill_price"]
            assert response["model_version"] == row.model_version == deployed
            portfolio = next_portfolio(portfolio, info)
        trade_values = record["trade_value"].to_numpy()
        assert np.count_nonzero(trade_values > 0.0) >= 1 and np.count_nonzero(trade_values < 0.0) >= 1
    finally:
        server.close()

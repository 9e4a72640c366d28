"""The export pipeline on an in-memory catalog with a tiny trained SACWithICM: the ONNX actor, its
reports, its inference config and the served model's package."""

import json

import onnx
import pytest
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner

from trading_rl.export import PortfolioState, SafeguardConfig, Safeguards, SignalEngine
from trading_rl.pipelines.export import create_pipeline
from trading_rl.serving import Decider, DecisionLog, feature_params_digest


class KeptDataset(MemoryDataset):
    """A MemoryDataset the runner does not release once its consumers ran: read after the run."""

    def _release(self) -> None:
        pass


HOOK = "https://hooks.example.com/services/T0/B0/secret-token"
PARAMS = {
    "parity": {"split": "validation", "n_observations": 1000, "max_real": 100, "tolerance": 1e-5},
    "latency": {"repeats": 100, "warmup": 10, "intra_op_threads": 1},
    "safeguards": {"max_trades_per_day": 3, "min_confidence": 0.2},
}


def _catalog(setup, params):
    return DataCatalog(
        {
            "sac_icm_model": MemoryDataset(setup.model, copy_mode="assign"),
            "env_spec": MemoryDataset(setup.spec, copy_mode="assign"),
            "feature_params": MemoryDataset({"sp500": setup.feature_params.to_dict()}),
            "scalers": MemoryDataset({"sp500": setup.scaler}),
            "params:export": MemoryDataset(params),
            "params:seed": MemoryDataset(7),
            "prices": MemoryDataset(setup.prices.assign(symbol="sp500")),
            "params:serving": MemoryDataset({"max_request_bytes": 500_000}),
            "params:alerting": MemoryDataset({"drawdown": {"critical": 0.3}, "channels": {"webhook": {"url": HOOK}}}),
            "run_metadata": MemoryDataset({"save_version": "2030-01-01T00.00.00.000Z"}),
            # the outputs the package node consumes, kept to be read after the run
            "sac_icm_model_onnx": KeptDataset(),
            "sac_icm_model_inference_config": KeptDataset(),
        }
    )


@pytest.mark.slow
def test_pipeline_writes_onnx_report_and_a_working_inference_config(export_pipeline_setup):
    setup = export_pipeline_setup
    catalog = _catalog(setup, PARAMS)
    outputs = SequentialRunner().run(create_pipeline(agents=["sac_icm_model"]), catalog)
    onnx_bytes = catalog.load("sac_icm_model_onnx")
    report = outputs["sac_icm_model_export_report"].load()
    config = catalog.load("sac_icm_model_inference_config")

    onnx.checker.check_model(onnx.load_model_from_string(onnx_bytes))
    json.dumps(report), json.dumps(config)  # both are JSON datasets in the catalog
    assert report["symbol"] == "sp500" and report["parity_split"] == "validation"
    assert report["parity"]["passed"] and report["parity"]["n_observations"] == 1000
    assert report["parity"]["n_real"] == 63 and report["parity"]["max_abs_diff"] <= 1e-5  # whole split
    assert report["latency"]["onnxruntime"]["repeats"] == 100

    engine = SignalEngine.from_inference_config(
        onnx_bytes, config, safeguards=Safeguards(SafeguardConfig.from_mapping(config["safeguards"]))
    )
    assert engine.safeguards.config.max_trades_per_day == 3
    observation = engine.observation(setup.prices, PortfolioState(cash=1e5))
    expected, _ = setup.model.predict(observation, deterministic=True)
    assert engine.action(observation) == pytest.approx(float(expected[0]), abs=1e-5)

    # The served model's package: the same actor and config, plus what requests are checked against.
    package = outputs["sac_icm_model_served"].load()
    assert package.onnx == onnx_bytes and package.source_dataset == "sac_icm_model"
    assert package.model_version == "2030-01-01T00.00.00.000Z"  # the agent has none of its own: the run's
    assert {key: package.config[key] for key in config} == config
    assert package.config["bar_interval_seconds"] == 86400.0 and package.config["timezone"] is None
    assert package.config["min_bars"] == 60 + 4 and package.config["max_request_bytes"] == 500_000
    assert package.config["feature_params_digest"] == feature_params_digest(config)
    # The run's alerting section, stored without the webhook's URL (it may hold a token).
    assert package.config["alerting"]["drawdown"]["critical"] == 0.3
    assert package.config["alerting"]["channels"]["webhook"]["url"] is None
    assert HOOK not in json.dumps(package.config)
    # The example request: every bar up to the env's first decision of the validation split, flat.
    example = package.example
    first_decision = setup.spec.prices["validation"].index[3]
    assert example["bars"]["timestamp"][0] == setup.prices.index[0].isoformat()
    assert example["bars"]["timestamp"][-1] == first_decision.isoformat()
    response = Decider(package.onnx, package.config, DecisionLog(None)).decide(example)
    bars = setup.prices.loc[:first_decision]
    signal = SignalEngine.from_inference_config(onnx_bytes, config).signal(bars, PortfolioState(cash=1e5))
    assert (response["raw_action"], response["policy"]["kind"]) == (signal.raw_action, signal.kind)


def test_bad_parameters_fail_before_anything_is_written(export_pipeline_setup):
    bad = {**PARAMS, "safeguards": {"max_trade_per_day": 3}}
    with pytest.raises(ValueError, match="unknown parameter 'export.safeguards.max_trade_per_day'"):
        SequentialRunner().run(create_pipeline(agents=["sac_icm_model"]), _catalog(export_pipeline_setup, bad))


def test_registered_pipeline_exports_each_listed_agent():
    pipeline = create_pipeline(agents=["sac_icm_model", "other_model"])
    assert {node.name for node in pipeline.nodes} == {
        "export_sac_icm_model",
        "package_served_sac_icm_model",
        "export_other_model",
        "package_served_other_model",
    }
    assert {
        "other_model_onnx",
        "other_model_export_report",
        "other_model_inference_config",
        "other_model_served",
    } <= pipeline.all_outputs()
    assert [node.name for node in create_pipeline().nodes] == ["export_sac_icm_model", "package_served_sac_icm_model"]

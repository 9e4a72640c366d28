"""The served model through the project's MLflow hooks, as `kedro run` logs it: the package the export
pipeline makes is logged as the served pyfunc and, when the run's gates passed, registered, tagged
with the agent's dataset and save version (what deployment reads)."""

from __future__ import annotations

import mlflow
import pytest
from helpers.mlflow_store import empty_store
from kedro.framework.hooks.manager import _create_hook_manager
from kedro.io import DataCatalog
from kedro.pipeline import Node, Pipeline
from kedro.runner import SequentialRunner

from trading_rl.integration.mlflow_hooks import MlflowConventionHooks
from trading_rl.serving import DECISION_LOG_ENV

VERSION = "2030-01-01T00.00.00.000Z"
REPORTING = {"kedro-viz": {"layer": "reporting"}}


@pytest.mark.slow
def test_a_run_whose_gates_passed_registers_the_served_model(serving_setup, tmp_path, monkeypatch):
    monkeypatch.setenv(DECISION_LOG_ENV, str(tmp_path / "decisions.jsonl"))
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(empty_store(tmp_path / "mlflow.db"))
    try:
        catalog = DataCatalog.from_config(
            {
                "sac_icm_model_served": {
                    "type": "MemoryDataset",
                    "copy_mode": "assign",
                    "metadata": {
                        "mlflow": {
                            "model": "sac_icm_served",
                            "registered_model": "served_agent",
                            "gates": ["validation_report"],
                        }
                    },
                },
                "validation_report": {"type": "MemoryDataset", "metadata": REPORTING},
            },
            save_version=VERSION,
        )
        pipeline = Pipeline(
            [
                Node(lambda: serving_setup.package, None, "sac_icm_model_served", name="package_served"),
                Node(lambda: {"passed": True, "failed": []}, None, "validation_report", name="validate"),
            ]
        )
        hooks = MlflowConventionHooks()
        manager = _create_hook_manager()
        manager.register(hooks)
        experiment = mlflow.create_experiment("served", artifact_location=(tmp_path / "artifacts").as_uri())
        with mlflow.start_run(experiment_id=experiment):
            hooks.after_catalog_created(catalog=catalog, save_version=VERSION)
            hooks.before_pipeline_run(run_params={"pipeline_names": ["export"]}, pipeline=pipeline, catalog=catalog)
            SequentialRunner().run(pipeline, catalog, manager)
            hooks.after_pipeline_run()
        client = mlflow.MlflowClient()
        (version,) = client.search_model_versions("name='served_agent'")
        assert version.tags["dataset"] == "sac_icm_model" and version.tags["save_version"] == VERSION
        assert version.tags["gate.validation_report"] == "passed"
        assert version.tags["serving"] == "bars and portfolio in, signal out (docs/serve.md)"
        served = mlflow.pyfunc.load_model("models:/served_agent/1")
        assert served.metadata.metadata["model_version"] == serving_setup.package.model_version
        assert served.metadata.get_input_schema() is not None and served.input_example is not None
        (response,) = served.predict([serving_setup.package.example])
        assert response["model_version"] == "2030-01-01T00.00.00.000Z"
        assert len((tmp_path / "decisions.jsonl").read_text().splitlines()) == 1  # logging the model decided nothing
    finally:
        mlflow.set_tracking_uri(previous)

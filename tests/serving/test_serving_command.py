"""The documented command on a registry in tmp_path: the served model registered as
``trading_rl_sac_icm``, promoted to ``@champion`` by the project's promotion, and ``mlflow models serve
-m "models:/trading_rl_sac_icm@champion" --env-manager local`` answering ``POST /invocations`` with
the model's stored input example (what docs/serve.md's ``curl`` sends)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import mlflow
import pytest
from helpers.mlflow_store import empty_store
from helpers.served_model import request_for

from trading_rl.integration.mlflow_tracking import SERVED_REQUEST, log_served_model, register_if_gates_pass
from trading_rl.integration.model_registry import (
    CHAMPION,
    SERVED_TAG,
    apply_promotion,
    promotion,
    registry_versions,
)
from trading_rl.serving import DECISION_LOG_ENV

REGISTERED = "trading_rl_sac_icm"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def champion(serving_setup, tmp_path):
    """A store in tmp_path whose trading_rl_sac_icm@champion is the served model."""
    store = empty_store(tmp_path / "mlflow.db")
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(store)
    try:
        experiment = mlflow.create_experiment("serve", artifact_location=(tmp_path / "artifacts").as_uri())
        with mlflow.start_run(experiment_id=experiment):
            info = log_served_model(serving_setup.package, "sac_icm_served", {"dataset": "sac_icm_model"})
            gates = {"validation_report": {"passed": True, "failed": []}}
            provenance = {
                "dataset": "sac_icm_model",
                "save_version": serving_setup.package.model_version,
                SERVED_TAG: SERVED_REQUEST,
            }
            version, blocking = register_if_gates_pass(info.model_uri, REGISTERED, gates, provenance)
        assert version is not None, blocking
        client = mlflow.MlflowClient(store, store)
        decision = promotion(REGISTERED, registry_versions(client, REGISTERED)["versions"], None, CHAMPION, "me", "now")
        apply_promotion(client, decision, None)
    finally:
        mlflow.set_tracking_uri(previous)
    return store


@pytest.mark.slow
def test_mlflow_models_serve_answers_the_documented_request_on_the_champion(champion, serving_setup, tmp_path):
    port, log = _free_port(), tmp_path / "decisions.jsonl"
    environment = {
        **os.environ,
        "MLFLOW_TRACKING_URI": champion,
        DECISION_LOG_ENV: str(log),
        # uvicorn on the PATH, as in an activated environment
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    command = [sys.executable, "-m", "mlflow", "models", "serve", "-m", f"models:/{REGISTERED}@{CHAMPION}"]
    command += ["--env-manager", "local", "--port", str(port)]
    output = tmp_path / "serve.log"
    with open(output, "wb") as sink:
        server = subprocess.Popen(
            command, cwd=tmp_path, env=environment, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        # While the server starts: the request docs/serve.md's curl sends, the model's stored example.
        download = [sys.executable, "-m", "mlflow", "artifacts", "download", "-d", str(tmp_path / "example")]
        download += ["-u", f"models:/{REGISTERED}@{CHAMPION}/serving_input_example.json"]
        subprocess.run(download, cwd=tmp_path, env=environment, check=True, capture_output=True, timeout=60)
        example = json.loads((tmp_path / "example" / "serving_input_example.json").read_text())
        deadline = time.monotonic() + 45
        while True:
            assert server.poll() is None, output.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "no answer in 45 s:\n" + output.read_text()[-3000:]
                time.sleep(0.5)
        url = f"http://127.0.0.1:{port}/invocations"
        status, body = _post(url, example)
        assert status == 200, body
        (response,) = body["predictions"]
        assert response["model_version"] == "2030-01-01T00.00.00.000Z"
        assert response["signal"]["action"] in {"HOLD", "BUY", "SELL"} and "target_position" in response
        assert response["feature_params_digest"].startswith("sha256:")
        # State across requests lives in the server: a bar older than the one just decided is refused.
        latest = example["inputs"][0]["bars"]["timestamp"][-1]
        older = request_for(serving_setup.prices.loc[:latest].iloc[:-1])
        status, body = _post(url, {"inputs": [older]})
        assert (status, body["field"]) == (400, "bars.timestamp") and "older" in body["message"]
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        assert [line["status"] for line in lines] == ["decided", "refused"]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    text = output.read_text()
    assert "Running command 'exec uvicorn" in text and "virtualenv" not in text.lower()  # no environment built
    assert sorted(path.name for path in tmp_path.iterdir() if path.is_file()) == [
        "decisions.jsonl",
        "mlflow.db",
        "serve.log",
    ]

"""Latency of the served model: one decision through ``mlflow models serve`` (HTTP round trip), through
the loaded pyfunc model (the model call), and ``SignalEngine.signal`` called in-process (the
baseline), on the same request.

The model is the served package of an untrained ``base``-size actor (net_arch [256, 256, 128]) on
the default env (window 10 x 26 features) and S&P 500 daily bars, as ``inference_latency.py`` builds
it: latency depends on the graph and the feature computation, not on the weights. Each request
carries ``--history`` bars (``min``: the fewest the model takes) ending at the validation split's
last bar and a flat account; the same request is sent every time (the server decides a repeated bar
again, so its state allows it). Timed, each over ``--repeats`` calls after ``--warmup``:

- ``SignalEngine.signal``: the in-process decision on the same bars (a DataFrame already built);
- ``model call``: ``PyFuncModel.predict([request])`` in this process (MLflow's input handling, the
  request checks, the decision, the safeguards, one decision-log line);
- ``HTTP round trip``: ``POST /invocations`` to ``mlflow models serve -m <model folder>
  --env-manager local`` (one uvicorn worker) over one kept-alive connection, the JSON body
  serialised once, the response read and parsed.

    python benchmarks/serving.py [--repeats 500] [--history 1000] [--output docs/results/serving_latency.json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from inference_latency import _setup

from trading_rl.export import PortfolioState, SignalEngine, export_actor, latency_percentiles
from trading_rl.integration.mlflow_tracking import save_served_model
from trading_rl.monitoring.alerting import AlertingParams
from trading_rl.serving import ALERTS_FILE_ENV, DECISION_LOG_ENV, ServingParams, served_package

TARGET_P95_MS = 10.0


def _package(history: str):
    prices, feature_params, scaler, spec, model = _setup()
    config = {
        "symbol": "sp500",
        "feature_params": feature_params.to_dict(),
        "scaler": scaler,
        "env_config": spec.config_data(),
        "feature_columns": list(spec.feature_columns),
        "safeguards": {},
    }
    end = spec.prices["validation"].index[-1]
    package = served_package(
        export_actor(model), config, prices, end, "benchmark", "sac_icm_model", ServingParams(), AlertingParams()
    )
    n_bars = package.config["min_bars"] if history == "min" else int(history)
    bars = prices.loc[:end].iloc[-n_bars:]
    request = {
        "symbol": "sp500",
        "bars": {"timestamp": [stamp.isoformat() for stamp in bars.index]}
        | {name: bars[name].astype(float).tolist() for name in ("open", "high", "low", "close", "volume")},
        "portfolio": {"cash": 100_000.0},
    }
    return package, bars, request


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serve(model_dir: Path, log: Path, work: Path) -> tuple[subprocess.Popen, int, float]:
    port = _free_port()
    environment = {
        **os.environ,
        DECISION_LOG_ENV: str(log),
        ALERTS_FILE_ENV: str(log.with_name("alerts.jsonl")),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    command = [sys.executable, "-m", "mlflow", "models", "serve", "-m", str(model_dir), "--env-manager", "local"]
    started = time.perf_counter()
    server = subprocess.Popen(
        [*command, "--port", str(port)],
        cwd=work,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    while True:
        if server.poll() is not None:
            raise RuntimeError("mlflow models serve exited")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/ping")
            if connection.getresponse().status == 200:
                return server, port, time.perf_counter() - started
        except OSError:
            time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--history", default="1000", help="bars per request, or 'min' (the fewest the model takes)")
    parser.add_argument("--output", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(1)

    package, bars, request = _package(args.history)
    body = json.dumps({"inputs": [request]}).encode()
    engine = SignalEngine.from_inference_config(package.onnx, package.config)
    state = PortfolioState(cash=100_000.0)
    results: dict = {
        "bars_per_request": len(bars),
        "request_bytes": len(body),
        "repeats": args.repeats,
        "signal_engine": latency_percentiles(lambda: engine.signal(bars, state), args.repeats, args.warmup),
    }
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        model_dir = work / "served"
        save_served_model(package, model_dir)
        os.environ[DECISION_LOG_ENV] = str(work / "in_process_decisions.jsonl")
        os.environ[ALERTS_FILE_ENV] = str(work / "in_process_alerts.jsonl")
        import mlflow.pyfunc

        model = mlflow.pyfunc.load_model(str(model_dir))
        results["model_call"] = latency_percentiles(lambda: model.predict([request]), args.repeats, args.warmup)
        server, port, startup = _serve(model_dir, work / "decisions.jsonl", work)
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            headers = {"Content-Type": "application/json"}

            def round_trip() -> None:
                connection.request("POST", "/invocations", body, headers)
                response = connection.getresponse()
                payload = response.read()
                if response.status != 200:
                    raise RuntimeError(payload.decode())
                json.loads(payload)

            results["http_round_trip"] = latency_percentiles(round_trip, args.repeats, args.warmup)
            results["server_start_s"] = startup
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
        results["decision_log_lines"] = len((work / "decisions.jsonl").read_text().splitlines())
    baseline = results["signal_engine"]
    for path in ("model_call", "http_round_trip"):
        results[path]["ratio_p50_vs_signal_engine"] = results[path]["p50_ms"] / baseline["p50_ms"]
        results[path]["ratio_p95_vs_signal_engine"] = results[path]["p95_ms"] / baseline["p95_ms"]
    results["target_p95_ms"] = TARGET_P95_MS
    results["target_met"] = results["http_round_trip"]["p95_ms"] < TARGET_P95_MS
    results["machine"] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0],
        "python": platform.python_version(),
        "numpy": np.__version__,
    }

    print(f"{results['bars_per_request']} bars per request ({results['request_bytes']} bytes of JSON)")
    print(f"{'path':<44}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'p95 / engine':>14}")
    rows = (
        ("SignalEngine.signal (in-process baseline)", "signal_engine"),
        ("model call (PyFuncModel.predict)", "model_call"),
        ("HTTP round trip (mlflow models serve)", "http_round_trip"),
    )
    for label, key in rows:
        timing = results[key]
        ratio = timing["p95_ms"] / baseline["p95_ms"]
        print(f"{label:<44}{timing['p50_ms']:>9.2f}{timing['p95_ms']:>9.2f}{timing['p99_ms']:>9.2f}{ratio:>13.2f}x")
    verdict = "met" if results["target_met"] else "not met"
    load = results["machine"]["load_average_1m"]
    print(f"target p95 < {TARGET_P95_MS} ms end to end: {verdict}; load average {load:.1f}")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""Latency of the served model: one decision through ``mlflow models serve`` (HTTP round trip), through
the loaded pyfunc model (the model call), and ``SignalEngine.signal`` called in-process (the
baseline), on the same request; with where the time goes.

The model is the served package of an untrained ``base``-size actor (net_arch [256, 256, 128]) on
the default env (window 10 x 26 features) and S&P 500 daily bars, as ``inference_latency.py`` builds
it: latency depends on the graph and the feature computation, not on the weights. Each request
carries ``--history`` bars (``min``: the fewest the model takes; ``all``: every bar from the file's
first, the request docs/serve.md asks for) ending at the validation split's last bar and a flat
account; the same request is sent every time (the server decides a repeated bar again, so its state
allows it). Timed, each over ``--repeats`` calls after ``--warmup``, the calls of a group in turns
(one call of each, then the next round) so that every row of a group sees the same load:

- in-process: ``SignalEngine.signal`` (the decision on the same bars, a DataFrame already built);
  the model call, ``PyFuncModel.predict([request])`` (MLflow's input handling, the request checks,
  the decision, the safeguards, the alert rules, one decision-log line); and its parts: the request
  checks (``parse_request``), the features (``feature_values`` over every bar sent) and MLflow's
  ``json.loads`` of the body (which its scoring server runs twice per request);
- over HTTP, one kept-alive connection each, the JSON body serialised once, the response read and
  parsed: ``mlflow models serve -m <model folder> --env-manager local`` (one uvicorn worker) on the
  served model; the same server on a model that does nothing (MLflow's scoring server alone:
  JSON in and out, its middleware, its thread hop); and a bare uvicorn app that reads the body and
  answers ``{}`` (the floor of any Python HTTP server on this machine at this load).

Every row also has its CPU time per call (``cpu_ms``: this process's, for HTTP the client's) and
the HTTP rows the server's (``server_cpu_ms``: every process of the server, from /proc, over the
timed calls): where the wall time exceeds the CPU time, the call waited for a core.

    python benchmarks/serving.py [--repeats 500] [--history 1000|min|all] [--output docs/results/serving_latency.json]
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
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from inference_latency import _setup

from trading_rl.export import PortfolioState, SignalEngine, export_actor
from trading_rl.features import feature_values
from trading_rl.integration.mlflow_tracking import save_served_model
from trading_rl.monitoring.alerting import AlertingParams
from trading_rl.serving import ALERTS_FILE_ENV, DECISION_LOG_ENV, ServingParams, parse_request, served_package
from trading_rl.serving.pyfunc import any_values_unvalidated_quietly

TARGET_P95_MS = 10.0
# MLflow's scoring server around a model that does nothing: its own cost per request.
NO_OP_MODEL = """
from typing import Any

import mlflow
from mlflow.pyfunc import PythonModel


class NoOp(PythonModel):
    def predict(self, context, model_input: list[dict[str, Any]], params=None) -> list[dict[str, Any]]:
        return [{}]


mlflow.models.set_model(NoOp())
"""
# A bare ASGI app on uvicorn (uvloop and httptools, as MLflow's server runs): reads the body, answers {}.
BARE_APP = """
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b"{}"})
"""


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
    history_bars = prices.loc[:end]
    n_bars = {"min": package.config["min_bars"], "all": len(history_bars)}.get(history) or int(history)
    bars = history_bars.iloc[-n_bars:]
    request = {
        "symbol": "sp500",
        "bars": {"timestamp": [stamp.isoformat() for stamp in bars.index]}
        | {name: bars[name].astype(float).tolist() for name in ("open", "high", "low", "close", "volume")},
        "portfolio": {"cash": 100_000.0},
    }
    return package, bars, request


def _in_turns(calls: dict[str, Callable[[], object]], repeats: int, warmup: int) -> dict[str, dict[str, float]]:
    """Wall-time p50 / p95 / p99 / mean and CPU time per call (ms) of each call, the calls run in
    turns: round ``i`` runs every call once."""
    for _ in range(warmup):
        for call in calls.values():
            call()
    wall = {name: np.empty(repeats) for name in calls}
    cpu = {name: np.empty(repeats) for name in calls}
    for i in range(repeats):
        for name, call in calls.items():
            cpu_start, start = time.process_time_ns(), time.perf_counter_ns()
            call()
            wall[name][i] = time.perf_counter_ns() - start
            cpu[name][i] = time.process_time_ns() - cpu_start
    timings = {}
    for name in calls:
        p50, p95, p99 = np.percentile(wall[name] / 1e6, [50, 95, 99])
        timings[name] = {
            "p50_ms": float(p50),
            "p95_ms": float(p95),
            "p99_ms": float(p99),
            "mean_ms": float(wall[name].mean() / 1e6),
            "cpu_ms": float(cpu[name].mean() / 1e6),
            "repeats": repeats,
        }
    return timings


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(command: list[str], work: Path, environment: dict[str, str]) -> tuple[subprocess.Popen, int]:
    """``command`` plus ``--port`` in its own session (its processes one group), not waited for."""
    port = _free_port()
    server = subprocess.Popen(
        [*command, "--port", str(port)],
        cwd=work,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return server, port


def _wait_until_up(server: subprocess.Popen, port: int) -> None:
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"the server on port {port} exited")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/ping")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)


def _cpu_seconds(group: int) -> float:
    """User + system CPU time of every process in process group ``group`` (from /proc)."""
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended
            continue
        if int(fields[2]) == group:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _post(port: int, body: bytes) -> Callable[[], None]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"}

    def round_trip() -> None:
        connection.request("POST", "/invocations", body, headers)
        response = connection.getresponse()
        payload = response.read()
        if response.status != 200:
            raise RuntimeError(payload.decode())
        json.loads(payload)

    return round_trip


def _http_rows(model_dir: Path, request: dict, body: bytes, work: Path, args) -> dict:
    """The HTTP round trips in turns: the served model, MLflow's server on a model that does nothing,
    a bare uvicorn app; each with the server's CPU time per request."""
    (work / "no_op_model.py").write_text(NO_OP_MODEL)
    (work / "bare_app.py").write_text(BARE_APP)
    import mlflow.pyfunc

    with any_values_unvalidated_quietly():
        mlflow.pyfunc.save_model(
            str(work / "no_op"), python_model=str(work / "no_op_model.py"), input_example=[request]
        )
    log = work / "decisions.jsonl"
    environment = {
        **os.environ,
        DECISION_LOG_ENV: str(log),
        ALERTS_FILE_ENV: str(work / "alerts.jsonl"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    serve = [sys.executable, "-m", "mlflow", "models", "serve", "--env-manager", "local", "-m"]
    commands = {
        "http_round_trip": [*serve, str(model_dir)],
        "mlflow_no_op_model": [*serve, str(work / "no_op")],
        "bare_uvicorn": [sys.executable, "-m", "uvicorn", "--app-dir", str(work), "bare_app:app"],
    }
    started = time.perf_counter()
    servers = {name: _start(command, work, environment) for name, command in commands.items()}
    try:
        for server, port in servers.values():
            _wait_until_up(server, port)
        startup = time.perf_counter() - started
        cpu_before = {name: _cpu_seconds(server.pid) for name, (server, _) in servers.items()}
        calls = {name: _post(port, body) for name, (_, port) in servers.items()}
        rows = _in_turns(calls, args.repeats, args.warmup)
        for name, (server, _) in servers.items():
            calls_made = args.repeats + args.warmup
            rows[name]["server_cpu_ms"] = (_cpu_seconds(server.pid) - cpu_before[name]) * 1e3 / calls_made
    finally:
        for server, _ in servers.values():
            os.killpg(server.pid, signal.SIGTERM)
        for server, _ in servers.values():
            server.wait(timeout=30)
    rows["servers_start_s"] = startup
    rows["decision_log_lines"] = len(log.read_text().splitlines())
    return rows


def _in_process_rows(package, bars, request: dict, body: bytes, model_dir: Path, args) -> dict:
    """``SignalEngine.signal``, the model call and its parts, in turns, in this process."""
    from mlflow.pyfunc.scoring_server import _decode_json_input

    engine = SignalEngine.from_inference_config(package.onnx, package.config)
    state = PortfolioState(cash=100_000.0)
    os.environ[DECISION_LOG_ENV] = str(model_dir.parent / "in_process_decisions.jsonl")
    os.environ[ALERTS_FILE_ENV] = str(model_dir.parent / "in_process_alerts.jsonl")
    import mlflow.pyfunc

    model = mlflow.pyfunc.load_model(str(model_dir))
    decider = model.unwrap_python_model().decider
    checked = parse_request(request, decider.limits)
    calls = {
        "signal_engine": lambda: engine.signal(bars, state),
        "model_call": lambda: model.predict([request]),
        "request_checks": lambda: parse_request(request, decider.limits),
        "features": lambda: feature_values(checked.index, checked.ohlcv, decider.engine.feature_params),
        "mlflow_json_decode": lambda: _decode_json_input(body),
    }
    return _in_turns(calls, args.repeats, args.warmup)


def _print(results: dict) -> None:
    baseline = results["signal_engine"]
    print(f"{results['bars_per_request']} bars per request ({results['request_bytes']} bytes of JSON)")
    print(f"{'path':<46}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'cpu ms':>8}{'server cpu':>11}{'p95/engine':>11}")
    rows = (
        ("SignalEngine.signal (in-process baseline)", "signal_engine"),
        ("model call (PyFuncModel.predict)", "model_call"),
        ("  its request checks (parse_request)", "request_checks"),
        ("  its features (feature_values)", "features"),
        ("MLflow's json.loads of the body (x2/request)", "mlflow_json_decode"),
        ("HTTP round trip (mlflow models serve)", "http_round_trip"),
        ("HTTP, MLflow's server on a no-op model", "mlflow_no_op_model"),
        ("HTTP, bare uvicorn app (reads, answers {})", "bare_uvicorn"),
    )
    for label, key in rows:
        timing = results[key]
        server = f"{timing['server_cpu_ms']:>11.2f}" if "server_cpu_ms" in timing else f"{'':>11}"
        ratio = timing["p95_ms"] / baseline["p95_ms"]
        print(
            f"{label:<46}{timing['p50_ms']:>8.2f}{timing['p95_ms']:>8.2f}{timing['p99_ms']:>8.2f}"
            f"{timing['cpu_ms']:>8.2f}{server}{ratio:>10.2f}x"
        )
    verdict = "met" if results["target_met"] else "not met"
    load = results["machine"]["load_average_1m"]
    print(f"target p95 < {TARGET_P95_MS} ms end to end: {verdict}; load average {load[0]:.1f} -> {load[1]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--history", default="1000", help="bars per request, 'min' or 'all' (from the file's first)")
    parser.add_argument("--output", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(1)

    load_start = os.getloadavg()[0]
    package, bars, request = _package(args.history)
    body = json.dumps({"inputs": [request]}).encode()
    results: dict = {"bars_per_request": len(bars), "request_bytes": len(body), "repeats": args.repeats}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        model_dir = work / "served"
        save_served_model(package, model_dir)
        results |= _in_process_rows(package, bars, request, body, model_dir, args)
        results |= _http_rows(model_dir, request, body, work, args)
    baseline = results["signal_engine"]
    for path in ("model_call", "http_round_trip"):
        results[path]["ratio_p50_vs_signal_engine"] = results[path]["p50_ms"] / baseline["p50_ms"]
        results[path]["ratio_p95_vs_signal_engine"] = results[path]["p95_ms"] / baseline["p95_ms"]
    results["target_p95_ms"] = TARGET_P95_MS
    results["target_met"] = results["http_round_trip"]["p95_ms"] < TARGET_P95_MS
    results["machine"] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1m": [load_start, os.getloadavg()[0]],
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    _print(results)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()

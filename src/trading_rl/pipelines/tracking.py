"""Training metrics to MLflow while training runs (``train_agent``'s ``metrics_callback``), so a long
run shows its curves in the MLflow UI before its node ends."""

from __future__ import annotations

from collections.abc import Callable

from trading_rl.integration.mlflow_tracking import is_loggable, metric_key


def stream_to_mlflow(prefix: str) -> Callable[[dict, int], None]:
    """``callback(metrics, step)`` logging every finite number at ``step`` on the active MLflow run
    (kedro-mlflow's), with the key and NaN rules of ``PhaseMetricsDataset`` (``mlflow_tracking``):
    ``<prefix>/<group>/<metric>``, undefined values left out. Without an active run (a run outside
    Kedro, a test) it does nothing."""

    def callback(metrics: dict, step: int) -> None:
        import mlflow

        if mlflow.active_run() is None:
            return
        finite = {metric_key(prefix, key): float(value) for key, value in metrics.items() if is_loggable(value)}
        if finite:
            mlflow.log_metrics(finite, step=int(step))

    return callback


def log_history(prefix: str, history: list[dict], step_key: str = "timestep") -> None:
    """Log a finished training's per-evaluation ``history`` (flat dicts with ``step_key``) at its
    steps, as ``stream_to_mlflow(prefix)`` would have while it ran: for trainings that ran in a
    worker process (Ray), which has no MLflow run of its own to stream to."""
    callback = stream_to_mlflow(prefix)
    for entry in history:
        callback({key: value for key, value in entry.items() if key != step_key}, int(entry[step_key]))

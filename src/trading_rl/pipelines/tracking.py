"""Training metrics to MLflow while training runs (``train_agent``'s ``metrics_callback``), so a long
run shows its curves in the MLflow UI before its node ends."""

from __future__ import annotations

import math
from collections.abc import Callable


def stream_to_mlflow(prefix: str) -> Callable[[dict, int], None]:
    """``callback(metrics, step)`` logging every finite number as ``<prefix>/<key>`` at ``step`` on
    the active MLflow run (kedro-mlflow's); undefined values are left out, never logged as NaN.
    Without an active run (a run outside Kedro, a test) it does nothing."""

    def callback(metrics: dict, step: int) -> None:
        import mlflow

        if mlflow.active_run() is None:
            return
        finite = {
            f"{prefix}/{key}": float(value)
            for key, value in metrics.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        }
        if finite:
            mlflow.log_metrics(finite, step=int(step))

    return callback

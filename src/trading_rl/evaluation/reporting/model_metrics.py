"""Each logged model's own evaluation metrics, read from the dataset its catalog entry names
(``metadata: {mlflow: {model: ..., metrics: <dataset>}}``): what MLflow links to the model, so every
logged model can be compared with every other on its own numbers."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pandas as pd

from trading_rl.evaluation.reporting.summary import agent_rows
from trading_rl.evaluation.validation.folds import chain_metrics


def own_metrics(source: str, data: Any, model: str, name: str) -> dict[str, Any]:
    """The metrics of the logged model ``name`` (catalog model ``model``) in ``data``, the dataset
    ``source``:

    - a walk-forward folds table: the medians over the chain's own test windows;
    - a training history (a list of evaluations): the last evaluation's ``eval/*`` metrics;
    - ``migration_comparison``: the migrated (or fine-tuned) checkpoint's row on the comparison split;
    - an export report (``*_export_report``): the ONNX actor's parity with the policy and its latency;
    - any other report: the run summary's row for the model.
    """
    suffix = name.removeprefix(f"{model}_")
    if isinstance(data, pd.DataFrame):
        return chain_metrics(data, suffix)
    if isinstance(data, list):
        last: dict[str, Any] = next(
            (entry for entry in reversed(data) if any(k.startswith("eval/") for k in entry)), {}
        )
        return {key.removeprefix("eval/"): value for key, value in last.items() if key.startswith("eval/")}
    if source == "migration_comparison":
        for checkpoint, entry in data["checkpoints"].items():
            if PurePosixPath(checkpoint).stem == suffix:
                return dict(entry["agents"].get(model) or {})
        return {}
    if source.endswith("_export_report"):
        onnx = data["latency"]["onnxruntime"]
        return {
            "parity_max_abs_diff": data["parity"]["max_abs_diff"],
            "parity_mean_abs_diff": data["parity"]["mean_abs_diff"],
            "latency_p50_ms": onnx["p50_ms"],
            "latency_p95_ms": onnx["p95_ms"],
            "latency_p99_ms": onnx["p99_ms"],
        }
    rows = [row for row in agent_rows({source: data}) if row.agent == name]
    return dict(rows[0].metrics) if rows else {}

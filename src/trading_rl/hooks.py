"""Cross-cutting concerns: one seed drives everything, every run records where it came from, and a
run whose validation gates failed ends by saying so.

``run_metadata`` (seed, config hash, git commit, save version) is injected into the catalog so that
nodes storing a model can store it alongside, and it is set as MLflow tags on the active run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import subprocess
from typing import Any

import numpy as np
from kedro.framework.hooks import hook_impl

logger = logging.getLogger(__name__)


def config_hash(parameters: dict[str, Any]) -> str:
    """Stable short hash of the resolved parameters (key order does not matter)."""
    payload = json.dumps(parameters, sort_keys=True, default=str).encode()
    return hashlib.sha256(payload).hexdigest()[:16]


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def set_torch_threads(threads: int | None) -> None:
    import torch

    if threads is None:
        return
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"parameter 'torch_threads' must be a positive integer or null, got {threads!r}")
    torch.set_num_threads(threads)


class ReproducibilityHooks:
    def __init__(self) -> None:
        self._metadata: dict[str, Any] = {}
        self._tagged = False

    @hook_impl
    def after_catalog_created(self, catalog, parameters, save_version) -> None:
        parameters = parameters["parameters"]  # Kedro passes {"parameters": ..., "params:<key>": ...}
        if "seed" not in parameters:
            raise ValueError("parameter 'seed' is missing from conf/*/parameters.yml")
        seed = parameters["seed"]
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ValueError(f"parameter 'seed' must be an integer, got {seed!r}")
        seed_everything(seed)
        set_torch_threads(parameters.get("torch_threads"))
        self._metadata = {
            "seed": seed,
            "config_hash": config_hash(parameters),
            "git_commit": git_commit(),
            "save_version": save_version,
        }
        self._tagged = False
        catalog["run_metadata"] = self._metadata

    @hook_impl
    def before_node_run(self) -> None:
        if self._tagged:
            return
        import mlflow

        if mlflow.active_run() is not None:
            mlflow.set_tags({f"trading_rl.{k}": str(v) for k, v in self._metadata.items()})
            self._tagged = True


class ValidationGateHooks:
    """Re-log a failed validation report as the last line of the run (WARNING, gates named), so it
    is not buried under the nodes' logs when ``validation.fail_on_gate_failure`` is false. Only runs
    that produced a ``validation_report`` say anything."""

    def __init__(self) -> None:
        self._report: dict[str, Any] | None = None

    @hook_impl
    def before_pipeline_run(self) -> None:
        self._report = None

    @hook_impl
    def after_node_run(self, outputs: dict[str, Any]) -> None:
        if "validation_report" in outputs:
            self._report = outputs["validation_report"]

    @hook_impl
    def after_pipeline_run(self) -> None:
        from trading_rl.evaluation.gates import failure_message

        message = None if self._report is None else failure_message(self._report)
        if message is not None:
            logger.warning("%s (see validation_report)", message)

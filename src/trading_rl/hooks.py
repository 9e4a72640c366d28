"""Cross-cutting concerns: one seed drives everything, every run records where it came from, and a
run whose validation gates failed ends by saying so.

``run_metadata`` (seed, config hash, git commit, save version) is injected into the catalog so that
nodes storing a model can store it alongside, and it is set as MLflow tags on the active run.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import numpy as np
from kedro.framework.hooks import hook_impl

from trading_rl.provenance import config_hash, git_commit

logger = logging.getLogger(__name__)


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
        if "run_metadata" in catalog:  # declared in the catalog (for its Kedro-Viz layer): fill it
            catalog.get("run_metadata").save(self._metadata)
        else:
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

"""MLflow the conventional way, from the catalog's own metadata (kedro-mlflow opens and closes the run).

- The run is named after what ran, on what and which save version; symbol and config env are tags.
- ``run_metadata`` gains ``symbol`` and ``input_versions`` (the version each versioned free input
  of the run resolves to), so a report carrying it tells which data it was computed from.
- Every saved figure is logged as an artifact ``<phase>/plots/<dataset>.png`` and every
  reporting-layer JSON as ``<phase>/reports/<dataset>.json``: no ``*_mlflow`` twin dataset per plot.
- A dataset whose catalog entry has ``metadata: {mlflow: {model: NAME}}`` is logged as an MLflow
  model (SB3 or hierarchical agent → pyfunc, ONNX bytes → onnx flavour, a served model's package →
  the served pyfunc) with a signature; a folder dataset's ``{key: agent}`` as ``NAME_<key>`` each. With
  ``registered_model`` and ``gates`` also set, a model version is registered at the end of the run
  only if every named gate report was produced by this run and passed. A served model's version is
  tagged with the dataset of the agent it serves (``dataset``: ``sac_icm_model``), whose saved file
  deployment reads at the version's ``save_version``.
"""

from __future__ import annotations

import logging
import re
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

import mlflow
from kedro.framework.hooks import hook_impl
from kedro.io.core import DatasetError
from mlflow.exceptions import MlflowException

from trading_rl.envs.compatibility import model_metadata
from trading_rl.evaluation.reporting.model_metrics import own_metrics
from trading_rl.evaluation.reporting.summary import GATE_REPORTS, gate_result_text, gate_results
from trading_rl.evaluation.reporting.tearsheet import EMPTY_PAGE_MARK
from trading_rl.integration.mlflow_tracking import (
    NOT_PRODUCED,
    SERVED_REQUEST,
    is_loggable,
    log_agent_model,
    log_onnx_model,
    log_served_model,
    register_if_gates_pass,
    run_name,
)
from trading_rl.integration.model_registry import SERVED_TAG
from trading_rl.integration.parameter_sections import configured_symbol
from trading_rl.serving.package import ServedPackage

logger = logging.getLogger(__name__)


EXPERIMENT_KIND_TAG, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"  # the UI's training view


def runner_name(runner: Any) -> str:
    """``SequentialRunner`` from Kedro's ``<kedro.runner.sequential_runner.SequentialRunner object at 0x..>``."""
    text = "SequentialRunner" if runner in (None, "None") else str(runner)  # Kedro records None for its default
    found = re.search(r"(\w+) object at 0x", text)
    return found.group(1) if found else text.rsplit(".", 1)[-1]


def parallel_runner_warning(runner: str) -> str | None:
    """What a run under ``ParallelRunner`` loses in MLflow, or ``None`` under the other runners.

    MLflow keeps the active run per thread; kedro-mlflow's ``before_node_run`` reopens the pipeline's
    run in each node's thread, so ``ThreadRunner`` nodes log to it like sequential ones
    (tests/integration/test_mlflow_threads.py). A worker process logs to the run as well, but the
    project's hooks there are copies: what they collect for the end of the run never comes back."""
    if runner != "ParallelRunner":
        return None
    return (
        "--runner ParallelRunner: nodes run in worker processes, whose copies of the project's hooks do not "
        "report back: logged models get no metrics of their own and none is registered, and the run summary "
        "lacks those nodes' reports and is not set as the MLflow run's description. Use the default runner or "
        "ThreadRunner for a complete MLflow run."
    )


def log_gate(report_name: str, report: dict[str, Any]) -> None:
    """A gate report's outcome as a tag ``gate.<report>`` (passed / FAILED / not checked, so runs can be
    filtered on it) and a metric ``gates/<report>`` (1 passed, 0 failed; none when not checked)."""
    (gate,) = gate_results({report_name: report})
    mlflow.set_tag(f"gate.{report_name}", gate_result_text(gate.passed))
    if gate.passed is not None:
        mlflow.log_metric(f"gates/{report_name}", 1.0 if gate.passed else 0.0)


def dataset_metadata(catalog, name: str) -> dict[str, Any]:
    dataset = catalog.get(name) if catalog is not None else None
    return dict(getattr(dataset, "metadata", None) or {})


def dataset_has_file(catalog, name: str) -> bool:
    """A file dataset (not one of kedro-mlflow's metric datasets, which are in MLflow already)."""
    return catalog is not None and getattr(catalog.get(name), "_filepath", None) is not None


def layer_of(metadata: dict[str, Any]) -> str | None:
    return (metadata.get("kedro-viz") or {}).get("layer")


def _figures(data: Any) -> dict[str, Any]:
    """The matplotlib figures in ``data`` (one figure, or a list/dict of them) by artifact suffix."""
    from matplotlib.figure import Figure

    if isinstance(data, Figure):
        return {"": data}
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    figures = {f"_{key}": value for key, value in items}
    return figures if figures and all(isinstance(f, Figure) for f in figures.values()) else {}


def _log_figures(figures: dict[str, Any], dataset: Any, phase: str, dataset_name: str) -> None:
    """Each figure as ``<phase>/plots/<dataset><suffix>.png``: the bytes the dataset just wrote when it
    keeps them (``RenderedFiguresDataset``: no second drawing, the artifact is the file in ``data/``),
    else drawn by ``mlflow.log_figure``."""
    rendered = getattr(dataset, "rendered_png", None)
    if rendered is None or len(rendered) != len(figures):
        for suffix, figure in figures.items():
            mlflow.log_figure(figure, f"{phase}/plots/{dataset_name}{PurePosixPath(suffix).stem}.png")
        return
    with tempfile.TemporaryDirectory() as folder:
        for suffix, png in zip(figures, rendered, strict=True):
            path = Path(folder, f"{dataset_name}{PurePosixPath(suffix).stem}.png")
            path.write_bytes(png)
            mlflow.log_artifact(str(path), f"{phase}/plots")


class MlflowConventionHooks:
    def __init__(self) -> None:
        self._catalog = None
        self._save_version: str | None = None
        self._reports: dict[str, dict] = {}
        # What logged models read their own metrics from (``metrics: <dataset>`` in their catalog
        # metadata): the datasets named so, as this run saved them.
        self._metric_sources: set[str] = set()
        self._sources: dict[str, Any] = {}
        # (dataset, ModelInfo, the catalog's mlflow metadata, the provenance a registered version is tagged with)
        self._models: list[tuple[str, Any, dict[str, Any], dict[str, Any]]] = []

    @hook_impl
    def after_catalog_created(self, catalog, save_version) -> None:
        self._catalog, self._save_version = catalog, save_version
        self._metric_sources = {
            str(spec["metrics"])
            for name in catalog.keys()
            if "metrics" in (spec := dataset_metadata(catalog, name).get("mlflow") or {})
        }

    @hook_impl(trylast=True)  # after kedro-mlflow has started the run and ReproducibilityHooks set run_metadata
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline, catalog) -> None:
        self._reports, self._sources, self._models = {}, {}, []
        symbol = configured_symbol(catalog)
        input_versions = {}
        for name in sorted(pipeline.inputs()):
            dataset = catalog.get(name) if not name.startswith("params:") else None
            resolve = getattr(dataset, "resolve_load_version", None)
            if resolve is not None and getattr(dataset, "_version", None) is not None:
                try:
                    input_versions[name] = resolve()
                except DatasetError:  # no version yet: the run fails at that input's node, with Kedro's message
                    continue
        metadata = catalog.load("run_metadata") if "run_metadata" in catalog else {}
        if "run_metadata" in catalog:  # a MemoryDataset set by ReproducibilityHooks: extend it in place
            catalog.get("run_metadata").save({**metadata, "symbol": symbol, "input_versions": input_versions})
        if mlflow.active_run() is None:
            return
        runner = runner_name(run_params.get("runner"))
        if (warning := parallel_runner_warning(runner)) is not None:
            logger.warning("%s", warning)
        name = run_name(run_params.get("pipeline_names"), symbol, self._save_version or run_params.get("run_id", ""))
        env = metadata.get("config_env") or run_params.get("env") or "local"  # Kedro's run_params: None for local
        mlflow.set_tags(
            {
                "mlflow.runName": name,
                "trading_rl.symbol": str(symbol),
                "trading_rl.env": str(env),
                "runner": runner,  # kedro-mlflow's tag is the runner's repr
            }
        )
        experiment_id = mlflow.active_run().info.experiment_id  # type: ignore[union-attr]
        mlflow.MlflowClient().set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data: Any, node) -> None:
        metadata = dataset_metadata(self._catalog, dataset_name)
        if isinstance(data, dict) and layer_of(metadata) == "reporting":
            self._reports[dataset_name] = data
        if dataset_name in self._metric_sources:
            self._sources[dataset_name] = data
        if mlflow.active_run() is None:
            return
        phase = node.namespace or node.name
        figures = _figures(data)
        dataset = self._catalog.get(dataset_name) if self._catalog is not None else None
        _log_figures(figures, dataset, phase, dataset_name)
        if (
            isinstance(data, dict)
            and not figures
            and layer_of(metadata) == "reporting"
            and dataset_has_file(self._catalog, dataset_name)
        ):
            mlflow.log_dict(data, f"{phase}/reports/{dataset_name}.json")
        if dataset_name.endswith("_tearsheet") and isinstance(data, str) and EMPTY_PAGE_MARK not in data:
            mlflow.log_text(data, f"{phase}/tearsheets/{dataset_name}.html")
        if isinstance(data, dict) and dataset_name in GATE_REPORTS:
            log_gate(dataset_name, data)
        spec = metadata.get("mlflow") or {}
        if "metrics" in spec:  # a dataset-factory entry names its source only once resolved
            self._metric_sources.add(str(spec["metrics"]))
        if "model" in spec:  # one model, or a folder dataset's {file name: model}
            for key, model in data.items() if isinstance(data, dict) else [(None, data)]:
                name = spec["model"] if key is None else f"{spec['model']}_{PurePosixPath(key).stem}"
                provenance = {
                    "dataset": model.source_dataset if isinstance(model, ServedPackage) else dataset_name,
                    "save_version": self._save_version,
                }
                if isinstance(model, ServedPackage):  # what `promote` checks a version serves
                    provenance[SERVED_TAG] = SERVED_REQUEST
                try:
                    info = self._log_model(model, name, provenance)
                except MlflowException as error:  # the model is saved in data/ already; say so, run on
                    logger.warning("%s not logged to MLflow as model %r: %s", dataset_name, name, error)
                else:
                    self._models.append((dataset_name, info, spec, provenance))

    def _log_model(self, data: Any, name: str, provenance: dict[str, Any]):
        if isinstance(data, ServedPackage):
            return log_served_model(data, name, provenance)
        if isinstance(data, (bytes, bytearray)):
            return log_onnx_model(bytes(data), name, provenance)
        return log_agent_model(data, name, {**provenance, **model_metadata(data)})

    def _log_model_metrics(self) -> None:
        """Each logged model's own evaluation (``metrics: <dataset>`` in its catalog metadata, read by
        ``evaluation.reporting.model_metrics.own_metrics``) as ``models/<name>/<metric>``, linked
        to the model."""
        for _, info, spec, _ in self._models:
            source = spec.get("metrics", "")
            if source not in self._sources:
                continue
            metrics = own_metrics(source, self._sources[source], spec["model"], info.name)
            for metric, value in metrics.items():
                if is_loggable(value):
                    mlflow.log_metric(f"models/{info.name}/{metric}", float(value), model_id=info.model_id)

    @hook_impl(tryfirst=True)  # before kedro-mlflow ends the run
    def after_pipeline_run(self) -> None:
        if mlflow.active_run() is None:
            return
        self._log_model_metrics()
        for dataset_name, info, spec, provenance in self._models:
            if "registered_model" not in spec:
                continue
            gates = {gate: self._reports.get(gate) for gate in spec.get("gates") or []}
            version, blocking = register_if_gates_pass(info.model_uri, spec["registered_model"], gates, provenance)
            if version is None:  # WARNING for a failed gate; INFO when a gate report is only missing
                failed = any(why != NOT_PRODUCED for why in blocking.values())
                logger.log(
                    logging.WARNING if failed else logging.INFO,
                    "%s not registered as %s: %s",
                    dataset_name,
                    spec["registered_model"],
                    "; ".join(f"{gate} {why}" for gate, why in blocking.items()),
                )
            else:
                logger.info("%s registered as %s version %s", dataset_name, spec["registered_model"], version.version)

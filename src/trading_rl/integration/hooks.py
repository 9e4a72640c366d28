"""Cross-cutting concerns: one seed drives everything, parameters are checked before anything is
written, every run records where it came from and ends with a summary of what it trained and which
gates failed, and an MLflow run whose process was killed does not stay ``RUNNING``.

``run_metadata`` (seed, config hash, git commit, save version) is injected into the catalog so that
nodes storing a model can store it alongside, and it is set as MLflow tags on the active run.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from kedro.framework.hooks import hook_impl
from kedro.io import AbstractVersionedDataset

from trading_rl.provenance import config_hash, git_commit

logger = logging.getLogger(__name__)


def ignored_local_message(env: str, ignored: list[str]) -> str:
    return (
        f"--env {env} reads conf/base + conf/{env} only and IGNORES {', '.join(ignored)}: this run uses "
        f"conf/{env}'s data selection and parameters, not yours (copy what you need into conf/{env} "
        f"or run without --env); its outputs go to the {env} data root, MLflow store and trial ledger"
    )


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


def config_env(config_loader: Any) -> str:
    """The env a run's configuration came from: ``--env`` or the default run env (``local``)."""
    return str(config_loader.env or config_loader.default_run_env or config_loader.base_env)


def ignored_local_files(config_loader: Any) -> list[str]:
    """The ``conf/local`` files a run in another env does not read (Kedro merges only base + env)."""
    env = config_env(config_loader)
    local = Path(config_loader.conf_source) / (config_loader.default_run_env or "local")
    if env == local.name or not local.is_dir():
        return []
    return sorted(str(path.relative_to(local.parent.parent)) for path in local.rglob("*.yml") if path.is_file())


class ReproducibilityHooks:
    """Seeds and ``run_metadata``; also says loudly, at the start and in the summary, which
    ``conf/local`` files a ``--env ci`` (or ``gpu``) run ignores: a quick run otherwise trains on the
    env's own symbols while the user's data selection sits unread in ``conf/local``."""

    def __init__(self) -> None:
        self._metadata: dict[str, Any] = {}
        self._tagged = False
        self._env = "local"

    @hook_impl
    def after_context_created(self, context) -> None:
        self._env = config_env(context.config_loader)
        ignored = ignored_local_files(context.config_loader)
        if ignored:
            logger.warning("%s", ignored_local_message(self._env, ignored))

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
            "config_env": self._env,
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


class ParameterValidationHooks:
    """Check every parameter section the run's pipelines read before the first node runs, so a bad
    parameter fails the run before any dataset is written (``trading_rl.integration.parameter_sections``).
    ``tryfirst``: before kedro-mlflow's hook opens a tracking run for a run that will not happen."""

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, pipeline, catalog) -> None:
        from trading_rl.config import plain
        from trading_rl.integration.parameter_sections import resolve_parameters

        used = {name.removeprefix("params:").split(".")[0] for name in pipeline.inputs() if name.startswith("params:")}
        resolved = resolve_parameters(catalog.load("parameters"), used)
        # The nodes, and kedro-mlflow, which logs their params: inputs, get every value the run uses,
        # the code's defaults included, not only the keys conf/ writes out.
        for name, section in resolved.items():
            if f"params:{name}" in catalog:
                catalog.save(f"params:{name}", plain(section))


SUMMARY_ARTIFACT = "run_summary.md"


def run_description(summary: str) -> str:
    """The MLflow run description of ``summary``: the whole summary as a code block where it fits
    MLflow's tag value limit, else its first lines and the name of the artifact that holds it whole."""
    from mlflow.utils.validation import MAX_TAG_VAL_LENGTH

    whole = f"```\n{summary}\n```"
    if len(whole) <= MAX_TAG_VAL_LENGTH:
        return whole
    note = f"\n```\n(cut: the whole summary, {len(summary):,} characters, is the run's artifact {SUMMARY_ARTIFACT})"
    head = summary[: MAX_TAG_VAL_LENGTH - len(note) - len("```\n")]
    return f"```\n{head.rsplit(chr(10), 1)[0]}{note}"


class RunSummaryHooks:
    """End every run with a summary (``evaluation.reporting.summary``): each phase's agent next to capped
    buy-and-hold and random, collapse verdicts, gates with failures named, the MLflow run(s) and the
    reports, plots and tearsheets written with this save version. Failed gates follow at WARNING, the
    validation gates last, so the log's last lines say what failed even when
    ``validation.fail_on_gate`` is false.

    The MLflow run is noted while nodes run: kedro-mlflow's own ``after_pipeline_run`` (a plugin
    hook, called before the project's) has already closed it when the summary is written.
    """

    def __init__(self) -> None:
        self._reports: dict[str, Any] = {}
        self._saved: list[str] = []
        self._runs: dict[str, str] = {}
        self._catalog = None
        self._ui: tuple[str, str] = ("127.0.0.1", "5000")
        self._ignored_local: str | None = None
        self._not_listed: set[str] = set()  # a phase's empty tearsheet outputs (nothing to show)

    @hook_impl
    def after_context_created(self, context) -> None:
        ui = getattr(getattr(context, "mlflow", None), "ui", None)  # set by kedro-mlflow from mlflow.yml
        if ui is not None:
            self._ui = (ui.host, ui.port)
        ignored = ignored_local_files(context.config_loader)
        self._ignored_local = ignored_local_message(config_env(context.config_loader), ignored) if ignored else None

    @hook_impl
    def before_pipeline_run(self, catalog) -> None:
        self._reports, self._saved, self._runs, self._catalog = {}, [], {}, catalog
        self._not_listed = set()

    @hook_impl
    def after_node_run(self, outputs: dict[str, Any]) -> None:
        from trading_rl.evaluation.reporting.summary import SUMMARY_REPORTS

        self._reports.update({name: data for name, data in outputs.items() if name in SUMMARY_REPORTS})
        self._note_mlflow_run()

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data: Any) -> None:
        from trading_rl.evaluation.reporting.tearsheet import EMPTY_PAGE_MARK, tearsheet_outputs

        self._saved.append(dataset_name)
        if dataset_name.endswith("_tearsheet") and isinstance(data, str) and EMPTY_PAGE_MARK in data:
            self._not_listed.update(tearsheet_outputs(dataset_name.removesuffix("_tearsheet")))

    def _note_mlflow_run(self) -> None:
        import mlflow

        run = mlflow.active_run()
        if run is not None and run.info.run_id not in self._runs:
            host, port = self._ui
            self._runs[run.info.run_id] = (
                f"run {run.info.run_id} ({mlflow.get_tracking_uri()}); open it with `kedro mlflow ui`: "
                f"http://{host}:{port}/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id}"
            )

    def _describe_runs(self, summary: str) -> None:
        """The summary, whole, as each MLflow run's artifact ``SUMMARY_ARTIFACT``, and as its
        description (the UI's "Description"; the run is closed already, which a tag may still be set
        on): whole where it fits MLflow's tag limit, else cut, naming the artifact (MLflow cut it at
        8,000 characters itself, with a warning)."""
        import mlflow
        from mlflow.exceptions import MlflowException

        for run_id in self._runs:  # none when tracking is off: no store is opened
            client = mlflow.MlflowClient()
            try:
                client.log_text(run_id, summary, SUMMARY_ARTIFACT)
                client.set_tag(run_id, "mlflow.note.content", run_description(summary))
            except MlflowException as error:  # the summary is in the log already; the run goes on
                logger.warning("MLflow run %s: summary not set as its description: %s", run_id, error)

    def _written_paths(self) -> dict[str, list[str]]:
        """Files of the versioned datasets saved in this run under ``08_reporting``, by kind."""
        groups: dict[str, list[str]] = {"tearsheets": [], "plots": [], "reports": []}
        for name in dict.fromkeys(self._saved):
            if name in self._not_listed:
                continue
            dataset = self._catalog.get(name) if self._catalog is not None and name in self._catalog else None
            version = dataset.resolve_save_version() if isinstance(dataset, AbstractVersionedDataset) else None
            if version is None:  # not versioned (e.g. an MLflow artifact's staging file): not this run's own
                continue
            path = Path(str(dataset._get_versioned_path(version)))  # what this run wrote
            if "08_reporting" not in path.parts:
                continue
            kind = "tearsheets" if name.endswith("_tearsheet") else "plots" if "plot" in name else "reports"
            files = sorted(path.iterdir()) if path.is_dir() else [path]  # a figure dataset saves a folder
            groups[kind] += [os.path.relpath(file) if file.is_relative_to(Path.cwd()) else str(file) for file in files]
        return groups

    @hook_impl
    def after_pipeline_run(self) -> None:
        from trading_rl.evaluation.reporting.summary import gate_results, summary_text

        summary = summary_text(self._reports, list(self._runs.values()), self._written_paths())
        logger.info("%s", summary)
        self._describe_runs(summary)
        for gate in gate_results(self._reports):
            if gate.passed is not False:  # passed, or not checked (said in the summary)
                continue
            logger.warning("%s gates failed: %s (see %s)", gate.phase, gate.details, gate.report)
        if self._ignored_local:
            logger.warning("%s", self._ignored_local)


HEARTBEAT_SECONDS = 30.0  # slack under a minute: a thread cannot beat while a C call (a matplotlib draw) holds the GIL


class _LastRecord(logging.Handler):
    """Notes when anything was last logged (any logger that reaches the root's handlers)."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.at = time.monotonic()

    def emit(self, record: logging.LogRecord) -> None:
        self.at = time.monotonic()


class ProgressHooks:
    """No silent minute: while nodes run, a line every ``interval`` seconds in which nothing else was
    logged, naming the running nodes and their elapsed time. Training phases log their own progress
    (evaluations, chains); this covers what they do not (a long training stretch, a slow rollout)."""

    def __init__(self, interval: float = HEARTBEAT_SECONDS) -> None:
        self._interval = interval
        self._running: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last = _LastRecord()

    @hook_impl(trylast=True)  # after the hooks that may still refuse the run
    def before_pipeline_run(self) -> None:
        self._stop.clear()
        self._last.at = time.monotonic()
        logging.getLogger().addHandler(self._last)
        self._thread = threading.Thread(target=self._watch, name="trading_rl-heartbeat", daemon=True)
        self._thread.start()

    @hook_impl
    def before_node_run(self, node) -> None:
        self._running[node.name] = time.monotonic()

    @hook_impl
    def after_node_run(self, node) -> None:
        self._running.pop(node.name, None)

    @hook_impl
    def on_node_error(self, node) -> None:
        self._running.pop(node.name, None)

    @hook_impl
    def after_pipeline_run(self) -> None:
        self._end()

    @hook_impl
    def on_pipeline_error(self) -> None:
        self._end()

    def _end(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        logging.getLogger().removeHandler(self._last)
        self._running.clear()

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            now = time.monotonic()
            running = dict(self._running)
            if running and now - self._last.at >= self._interval:
                logger.info(
                    "still running: %s",
                    ", ".join(f"{name} ({(now - started) / 60:.1f} min)" for name, started in running.items()),
                )


class MlflowRunHygieneHooks:
    """Tag the MLflow run with its host and process id, and end this experiment's runs whose process
    died (SIGKILL leaves them ``RUNNING``) as ``KILLED``. A run that fails with an exception is ended
    ``FAILED`` by kedro-mlflow's own ``on_pipeline_error``. Runs after kedro-mlflow started the run."""

    @hook_impl(trylast=True)
    def before_pipeline_run(self) -> None:
        import mlflow

        from trading_rl.monitoring.stale_runs import end_dead_runs, process_tags

        active = mlflow.active_run()
        if active is None:  # tracking switched off for this pipeline
            return
        mlflow.set_tags(process_tags())
        for run_id in end_dead_runs(mlflow.MlflowClient(), active.info.experiment_id, active.info.run_id):
            logger.warning("MLflow run %s was still RUNNING but its process is gone: marked KILLED", run_id)

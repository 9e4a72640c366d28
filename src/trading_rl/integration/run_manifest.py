"""A run's versions commit together: only completed runs' versions are loaded as "latest".

Every versioned dataset of a Kedro run is saved under the run's save version as soon as its node
finishes, so a run that fails halfway leaves some new versions behind. Kedro's plain "latest" would
then pair the failed run's ``prices`` with an older run's ``scaled_features``. These hooks add a
commit record on top of Kedro's versioning, without changing any dataset:

- ``after_pipeline_run`` (last of all hooks) saves the ``run_manifest`` catalog dataset under the
  run's save version: the pipelines, the versions the run loaded and the versions it saved. A run
  without a manifest did not complete (it failed, was killed or is still running).
- ``before_pipeline_run`` (first of all hooks) pins every versioned free input of the pipeline that
  ``--load-versions`` does not pin to the newest version a completed run wrote, warning when it skips
  newer versions; when no completed run wrote an input that has versions, the run stops before any
  node runs, with the ``--load-versions`` command that would accept those versions explicitly; an
  input with no version at all stops it with one sentence naming the pipeline that writes it.

A dataset class with ``picks_own_version = True`` (``PreviousVersionJSONDataset``) chooses its
version itself and is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import click
from kedro.framework.hooks import hook_impl
from kedro.io.core import AbstractVersionedDataset, Version

logger = logging.getLogger(__name__)

MANIFEST_DATASET = "run_manifest"


class IncompleteRunError(RuntimeError):
    """An input has versions, but none of them was written by a run that completed."""


def newest_complete_version(versions: Iterable[str], completed_runs: set[str]) -> str | None:
    """The newest of ``versions`` that is the save version of a completed run, else ``None``."""
    return max((version for version in versions if version in completed_runs), default=None)


def _pin_load_version(dataset: AbstractVersionedDataset, version: Version) -> None:
    """Make ``dataset`` use ``version`` (its load version pinned) for the rest of the run.

    Kedro's catalog offers no setter for a materialised dataset's load version (its own
    ``DataCatalog.get(version=...)`` copies the dataset with another ``_version``); replacing the
    catalog entry would drop its pandera validator, so the version is set in place.
    """
    dataset._version = version
    dataset._clear_version_cache()


def _versioned(catalog: Any, name: str) -> AbstractVersionedDataset | None:
    dataset = catalog.get(name)
    return dataset if isinstance(dataset, AbstractVersionedDataset) and dataset._version else None


def _incomplete_message(pipelines: str, newest: Mapping[str, str]) -> str:
    listed = ", ".join(f"'{name}' (newest version {version})" for name, version in newest.items())
    accept = ",".join(f"{name}:{version}" for name, version in newest.items())
    return (
        f"no completed run wrote {listed}, inputs of `kedro run --pipelines {pipelines}`: those versions "
        f"come from runs that failed, were killed, are still running or predate run manifests "
        f"(a completed run leaves data/09_runs/run_manifest.json/<version>/). Nothing was run. Fix: rerun "
        f"the pipeline that makes them, or accept these versions explicitly with "
        f"`kedro run --pipelines {pipelines} --load-versions {accept}`."
    )


def _makers(name: str) -> list[str]:
    """The registered pipelines that write ``name``, smallest first."""
    from kedro.framework.project import pipelines

    found = [(len(p.nodes), key) for key, p in pipelines.items() if key != "__default__" and name in p.all_outputs()]
    return [key for _, key in sorted(found)]


def _missing_message(pipelines: str, missing: list[str], catalog: Any) -> str:
    parts = []
    for name in missing:
        makers = _makers(name)
        where = getattr(catalog.get(name), "_filepath", "")
        parts.append(
            f"'{name}' ({where} has no version yet; "
            + (f"`kedro run --pipelines {makers[0]}` writes it)" if makers else "no pipeline writes it)")
        )
    return f"`kedro run --pipelines {pipelines}` needs " + ", ".join(parts) + ". Nothing was run."


class MissingInputError(click.ClickException):
    """An input no run has written yet: one sentence on the command line, no traceback."""


class RunManifestHooks:
    def __init__(self) -> None:
        self._saved: list[str] = []
        self._loaded: dict[str, str] = {}

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline: Any, catalog: Any) -> None:
        self._saved = []
        self._loaded = {}
        manifest = _versioned(catalog, MANIFEST_DATASET)
        if manifest is None:
            raise IncompleteRunError(
                f"the catalog has no versioned '{MANIFEST_DATASET}' dataset (conf/base/catalog.yml): "
                "without it no run can be recorded as complete"
            )
        completed_runs = set(manifest.list_versions(full_path=False))
        pinned_by_user = run_params.get("load_versions") or {}
        without_complete: dict[str, str] = {}
        missing: list[str] = []
        for name in sorted(pipeline.inputs()):
            dataset = _versioned(catalog, name)
            if dataset is None or getattr(dataset, "picks_own_version", False):
                continue
            version = dataset._version
            assert version is not None, "_versioned returns versioned datasets only"
            if name in pinned_by_user or version.load:
                self._loaded[name] = version.load
                continue
            versions = dataset.list_versions(full_path=False)
            if not versions:
                missing.append(name)
                continue
            chosen = newest_complete_version(versions, completed_runs)
            if chosen is None:
                without_complete[name] = versions[0]
                continue
            skipped = [version for version in versions if version > chosen]
            if skipped:
                logger.warning(
                    "dataset '%s': skipping version(s) %s written by runs that did not complete; "
                    "loading %s, the newest version of a completed run",
                    name,
                    ", ".join(skipped),
                    chosen,
                )
            _pin_load_version(dataset, Version(chosen, version.save))
            self._loaded[name] = chosen
        pipelines = ",".join(run_params.get("pipeline_names") or ["__default__"])
        if missing:
            raise MissingInputError(_missing_message(pipelines, missing, catalog))
        if without_complete:
            raise IncompleteRunError(_incomplete_message(pipelines, without_complete))

    @hook_impl
    def after_dataset_saved(self, dataset_name: str) -> None:
        self._saved.append(dataset_name)

    @hook_impl(trylast=True)
    def after_pipeline_run(self, run_params: dict[str, Any], catalog: Any) -> None:
        saved = {}
        for name in self._saved:
            dataset = _versioned(catalog, name)
            if dataset is not None:
                saved[name] = dataset.resolve_save_version()
        catalog.save(
            MANIFEST_DATASET,
            {
                "save_version": run_params["run_id"],
                "completed_at_utc": datetime.now(UTC).isoformat(timespec="seconds"),
                "pipelines": run_params.get("pipeline_names") or ["__default__"],
                "env": run_params.get("env"),
                "runtime_params": run_params.get("runtime_params") or {},
                "loaded": self._loaded,
                "saved": saved,
            },
        )

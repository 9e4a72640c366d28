"""RunManifestHooks on an in-memory catalog: which version a run loads, and what it records."""

from __future__ import annotations

import json
import logging

import pytest
from helpers.kedro_project import bootstrap
from kedro.io import DataCatalog
from kedro.io.core import Version
from kedro.pipeline import Node, Pipeline
from kedro_datasets.json import JSONDataset

from trading_rl.integration.run_manifest import (
    IncompleteRunError,
    MissingInputError,
    RunManifestHooks,
    newest_complete_version,
)

OLD, FAILED, NOW = "2026-01-01T00.00.00.000Z", "2026-01-02T00.00.00.000Z", "2026-01-03T00.00.00.000Z"


def _write(tmp_path, name, version, payload):
    path = tmp_path / f"{name}.json" / version / f"{name}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(payload))


def _catalog(tmp_path, load_versions=None):
    def versioned(name):
        return JSONDataset(
            filepath=str(tmp_path / f"{name}.json"), version=Version((load_versions or {}).get(name), NOW)
        )

    return DataCatalog({name: versioned(name) for name in ("prices", "env_spec", "run_manifest")})


PIPELINE = Pipeline([Node(lambda prices: prices, "prices", "env_spec", name="build")])


def _run_params(load_versions=None):
    return {"run_id": NOW, "pipeline_names": ["env_construction"], "env": "ci", "load_versions": load_versions or {}}


def test_newest_complete_version():
    assert newest_complete_version([FAILED, OLD], {OLD}) == OLD
    assert newest_complete_version([FAILED], {OLD}) is None


def test_a_failed_runs_version_is_skipped_with_a_warning(tmp_path, caplog):
    _write(tmp_path, "prices", OLD, "complete")
    _write(tmp_path, "prices", FAILED, "partial")
    _write(tmp_path, "run_manifest", OLD, {})
    catalog = _catalog(tmp_path)
    with caplog.at_level(logging.WARNING, logger="trading_rl.integration.run_manifest"):
        RunManifestHooks().before_pipeline_run(_run_params(), PIPELINE, catalog)
    assert catalog.load("prices") == "complete"
    assert f"dataset 'prices': skipping version(s) {FAILED}" in caplog.text


def test_load_versions_from_the_command_line_win(tmp_path):
    _write(tmp_path, "prices", OLD, "complete")
    _write(tmp_path, "prices", FAILED, "partial")
    _write(tmp_path, "run_manifest", OLD, {})
    catalog = _catalog(tmp_path, {"prices": FAILED})
    RunManifestHooks().before_pipeline_run(_run_params({"prices": FAILED}), PIPELINE, catalog)
    assert catalog.load("prices") == "partial"


def test_inputs_without_a_completed_run_stop_the_run(tmp_path):
    _write(tmp_path, "prices", FAILED, "partial")
    with pytest.raises(IncompleteRunError) as raised:
        RunManifestHooks().before_pipeline_run(_run_params(), PIPELINE, _catalog(tmp_path))
    assert f"'prices' (newest version {FAILED})" in str(raised.value)
    assert f"kedro run --pipelines env_construction --load-versions prices:{FAILED}" in str(raised.value)


def test_an_input_without_versions_stops_the_run_with_one_sentence_naming_its_pipeline(tmp_path):
    bootstrap()  # the registered pipelines say who writes 'prices'
    with pytest.raises(MissingInputError) as raised:
        RunManifestHooks().before_pipeline_run(_run_params(), PIPELINE, _catalog(tmp_path))
    assert raised.value.message == (
        f"`kedro run --pipelines env_construction` needs 'prices' ({tmp_path / 'prices.json'} has no version "
        "yet; `kedro run --pipelines feature_extraction` writes it). Nothing was run."
    )


def test_a_completed_run_records_what_it_loaded_and_saved(tmp_path):
    _write(tmp_path, "prices", OLD, "complete")
    _write(tmp_path, "run_manifest", OLD, {})
    catalog = _catalog(tmp_path)
    hooks = RunManifestHooks()
    hooks.before_pipeline_run(_run_params(), PIPELINE, catalog)
    catalog.save("env_spec", "spec")
    hooks.after_dataset_saved("env_spec")
    hooks.after_pipeline_run(_run_params(), catalog)
    manifest = json.loads((tmp_path / "run_manifest.json" / NOW / "run_manifest.json").read_text())
    assert manifest["loaded"] == {"prices": OLD}
    assert manifest["saved"] == {"env_spec": NOW}
    assert manifest["pipelines"] == ["env_construction"]


def test_a_catalog_without_the_manifest_dataset_is_refused(tmp_path):
    catalog = DataCatalog({"prices": JSONDataset(filepath=str(tmp_path / "p.json"))})
    with pytest.raises(IncompleteRunError, match="no versioned 'run_manifest' dataset"):
        RunManifestHooks().before_pipeline_run(_run_params(), PIPELINE, catalog)


def test_a_dataset_that_picks_its_own_version_is_left_alone(tmp_path):
    from trading_rl.integration.datasets.validation import PreviousVersionJSONDataset

    _write(tmp_path, "report", FAILED, {"gates": "failed"})
    catalog = _catalog(tmp_path)
    catalog["previous_report"] = PreviousVersionJSONDataset(str(tmp_path / "report.json"), version=Version(None, NOW))
    pipeline = Pipeline([Node(lambda report: report, "previous_report", "env_spec", name="compare")])
    RunManifestHooks().before_pipeline_run(_run_params(), pipeline, catalog)
    assert catalog.load("previous_report") == {"gates": "failed"}

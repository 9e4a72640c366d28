"""Lineage that reads: every catalog entry names its Kedro-Viz layer (the one its data folder
names), every phase is a modular pipeline of the same name, and every node has a role tag."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml
from helpers.kedro_project import PROJECT_ROOT, bootstrap
from kedro.pipeline import Node, Pipeline

from trading_rl.pipeline_registry import NOT_IN_DEFAULT, ROLE_TAGS, namespaced, phase_names, register_pipelines

FOLDER_LAYERS = {
    "01_raw": "raw",
    "02_intermediate": "intermediate",
    "03_primary": "primary",
    "04_feature": "feature",
    "05_model_input": "model_input",
    "06_models": "models",
    "07_model_output": "model_output",
    "08_reporting": "reporting",
    "09_runs": "reporting",
}
# Kedro-Viz turns layers off when they form a cycle; these datasets take the layer of their role
# instead of their folder (the catalog says why next to each).
LAYER_NOT_FOLDER = {
    "splits": "intermediate",
    "feature_params": "feature",
    "scalers": "feature",
    "walk_forward_equity": "reporting",
    "prior_trial_ledger": "raw",
}


def _catalog_entries():
    for path in sorted((PROJECT_ROOT / "conf" / "base").glob("catalog*.yml")):
        for name, entry in yaml.safe_load(path.read_text()).items():
            yield path.name, name, entry


def test_every_catalog_entry_has_the_layer_of_its_data_folder():
    for file, name, entry in _catalog_entries():
        layer = ((entry.get("metadata") or {}).get("kedro-viz") or {}).get("layer")
        assert layer in FOLDER_LAYERS.values(), f"{file}: {name} has no valid kedro-viz layer ({layer!r})"
        folder = re.search(r"data/(0\d_\w+?)/", str(entry.get("filepath") or entry.get("path") or "") + "/")
        if folder:
            expected = LAYER_NOT_FOLDER.get(name, FOLDER_LAYERS[folder.group(1)])
            assert layer == expected, f"{file}: {name} is in {folder.group(1)} but layer {layer}"


@pytest.fixture(scope="module")
def pipelines():
    bootstrap()
    return register_pipelines()


def test_each_phase_is_a_namespace_and_default_opens_as_one_box_per_phase(pipelines):
    default_phases = {name for name in phase_names() if name not in NOT_IN_DEFAULT}
    assert {node.namespace.split(".")[0] for node in pipelines["__default__"].nodes} == default_phases
    for name in phase_names():
        assert {node.namespace.split(".")[0] for node in pipelines[name].nodes} <= {
            name,
            "walk_forward",
            "regime_validation",
            "forward",
        }  # validation reuses those three phases' nodes
    # Dataset names are not prefixed: the catalog entries still match.
    assert {"sac_icm_model", "validation_report", "prices"} <= pipelines["__default__"].datasets()


def test_every_node_has_a_role_tag(pipelines):
    untagged = [node.name for p in pipelines.values() for node in p.nodes if not set(node.tags) & ROLE_TAGS]
    assert not untagged


def test_a_node_shared_by_two_pipelines_belongs_to_the_smaller_one():
    def identity(x):
        return x

    first, second = Node(identity, "a", "b", name="first"), Node(identity, "b", "c", name="second")
    result = namespaced({"small": Pipeline([first]), "large": Pipeline([first, second])})
    assert sorted(node.name for node in result["large"].nodes) == ["large.second", "small.first"]
    assert result["large"].outputs() == {"c"}  # datasets keep their names


def test_an_unknown_pipeline_name_suggests_the_close_ones(pipelines):
    import click

    with pytest.raises(click.ClickException, match=r"Did you mean one of these instead\?\n    sac_icm"):
        pipelines["sac_icmm"]


def test_every_node_that_reads_a_section_gets_it_typed_and_kedro_instantiates_none(pipelines):
    """A node with a ``params:<section>`` input is wired through ``typed_node.typed`` (it receives
    the section the run resolved once, and never parses one itself), and no node declares a
    dataclass parameter that Kedro 1.7 would build itself with ``cls(**mapping)``."""
    from kedro.validation.type_extractor import TypeExtractor

    from trading_rl.integration.parameter_sections import SECTIONS

    untyped = sorted(
        {
            node.name
            for pipeline in pipelines.values()
            for node in pipeline.nodes
            if any(name.removeprefix("params:") in SECTIONS for name in node.inputs if name.startswith("params:"))
            and node.func.__code__.co_name != "with_typed_sections"
        }
    )
    assert untyped == []
    assert TypeExtractor(dict(pipelines)).extract_types_from_pipelines() == {}


# Third-party modules that registering the pipelines (every ``kedro`` command) must not import: each
# is imported inside the function that needs it (docs/benchmarks.md, "`kedro` command start-up").
# torch and stable_baselines3 are not listed: the phase modules and the parameter sections import
# them at module level (docs/benchmarks.md says why that was left).
NOT_IMPORTED_BY_REGISTRATION = ("arch", "statsmodels", "scipy.stats", "matplotlib")


def test_registering_the_pipelines_imports_none_of_the_heavy_libraries():
    code = (
        "import sys\n"
        "from trading_rl.pipeline_registry import register_pipelines\n"
        "register_pipelines()\n"
        f"print(sorted(set({NOT_IMPORTED_BY_REGISTRATION!r}) & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout

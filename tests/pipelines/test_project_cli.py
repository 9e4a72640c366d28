"""The documented CLI entry points work on the project: registry listing, the kedro-viz build (layers
and one modular pipeline per phase) and a mistyped pipeline name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PHASES = (
    "feature_extraction",
    "env_construction",
    "sac_icm",
    "options_her",
    "reward_shaper",
    "checkpoint_migration",
    "walk_forward",
    "regime_validation",
    "validation",
    "forward",
    "export",
    "final_evaluation",
    "tuning",
)


def _kedro(args, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1"}
    kedro = Path(sys.executable).with_name("kedro")
    return subprocess.run([str(kedro), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_registry_list_shows_every_phase():
    result = _kedro(["registry", "list"], PROJECT_ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    for name in (*PHASES, "__default__"):
        assert f"- {name}\n" in result.stdout, name


@pytest.mark.slow
def test_viz_build_writes_the_static_site(tmp_path, project_copy):
    project = project_copy(tmp_path / "project")
    result = _kedro(["viz", "build"], project)
    assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]
    build = project / "build"
    assert (build / "index.html").is_file()
    main_api = next(build.rglob("main"), None)
    assert main_api is not None, sorted(str(p.relative_to(build)) for p in build.rglob("*"))[:50]
    text = main_api.read_text()
    for dataset in ("env_spec", "sac_icm_model", "validation_report"):
        assert dataset in text

    graph = json.loads(text)  # the __default__ pipeline as Kedro-Viz draws it
    datasets = [node for node in graph["nodes"] if node["type"] == "data"]
    assert datasets and not [node["name"] for node in datasets if not node.get("layer")]
    # Kedro-Viz lists the layers only when they form no cycle (else it draws none).
    assert graph["layers"] == ["raw", "intermediate", "feature", "model_input", "models", "model_output", "reporting"]
    boxes = {node["name"] for node in graph["nodes"] if node["type"] == "modularPipeline"}
    in_default = set(PHASES) - {"final_evaluation", "tuning"}
    assert in_default <= boxes, in_default - boxes
    top_level = graph["modular_pipelines"]["__root__"]["children"]
    assert {child["id"] for child in top_level if child["type"] == "modularPipeline"} == in_default
    tags = {tag["id"] for tag in graph["tags"]}
    assert {"train", "evaluate", "report", "plot"} <= tags
    # Every node sits in its phase's box; what else is on the top level are the phases' free
    # outputs, which Kedro-Viz always draws outside a box (docs/architecture.md, "Lineage").
    assert not [child for child in top_level if child["type"] == "task"]
    # The link the docs give for the ten-box view: this Kedro-Viz still reads `pid` and `types`
    # (element types shown) from the page's URL.
    bundle = "".join(path.read_text(errors="ignore") for path in (build / "assets").glob("index-*.js"))
    assert 'pipeline:"pid",types:"types"' in bundle


@pytest.mark.slow
def test_mistyped_pipeline_name_suggests_the_right_one_without_a_traceback(tmp_path, project_copy):
    # a copy: the session opens the ci MLflow store (data/ci/mlflow.db) before it looks the name up
    result = _kedro(["run", "--env", "ci", "--pipelines", "sac_icmm"], project_copy(tmp_path / "project"))
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Failed to find the pipeline named 'sac_icmm'" in output
    assert "Did you mean one of these instead?\n    sac_icm" in output
    assert "Traceback" not in output and "ImportError" not in output
    # trading_rl.integration.warnings_filters silences the third-party noise the project can control (not the
    # one kedro-mlflow's CLI plugin emits while `kedro` loads it, before any project code runs).
    assert "register_new_resolver" not in output and "dataset names contain '.'" not in output

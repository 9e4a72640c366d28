"""The documented CLI entry points work on the project: registry listing and the kedro-viz build."""

from __future__ import annotations

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
    "export",
    "final_evaluation",
)


def _kedro(args, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1"}
    kedro = Path(sys.executable).with_name("kedro")
    return subprocess.run(
        [str(kedro), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


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

"""Shared setup of the run-manifest, compatibility and bad-data fault cases.

A throw-away project whose only symbol is ``GOOD`` (700 real S&P 500 bars in a user file), run once
through ``feature_extraction`` + ``env_construction`` with the ci budgets, and helpers to fake what
earlier runs would have left in ``data/`` (a model trained on another spec, walk-forward returns of
other prices) through the project's own catalog, plus snapshots of ``data/``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from helpers.kedro_project import bootstrap
from helpers.tiny import tiny_agent
from trading_rl.data import load_prices

MANIFESTS = Path("data/09_runs/run_manifest.json")
GOOD_BARS = 700
LOCAL_PARAMETERS = """\
feature_extraction:
  symbols:
    - {name: GOOD, source: file}
  splits: {train_end: "2000-06-30", validation_end: "2000-12-31"}
env_construction:
  symbol: GOOD
"""
TINY_SAC_ICM = {
    "device": "cpu",
    "evaluation_split": "validation",
    "progress_bar": False,
    "agent": tiny_agent(
        sac={"buffer_size": 200, "learning_starts": 20},
        icm={"enabled": True, "warmup_steps": 10, "feature_dim": 4, "hidden_dim": 8},
        training={"total_timesteps": 40, "eval_freq": 40, "resume_every": 40},
    ),
}


def good_prices() -> pd.DataFrame:
    """The user file's frame (title-case columns, as a user export would have them)."""
    return load_prices("sp500").iloc[:GOOD_BARS].rename(columns=str.title)


def write_prices(project: Path, frame: pd.DataFrame, symbol: str = "GOOD") -> None:
    frame.to_csv(project / "data/01_raw/prices" / f"{symbol}.csv", index_label="Date")


def _root_conftest():
    """tests/conftest.py under its own module name (module-scoped fixtures cannot take its
    function-scoped factory fixtures, and the name ``conftest`` is shared by several folders)."""
    spec = importlib.util.spec_from_file_location("root_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_session(project: Path, pipelines: list[str], **kwargs):
    """One Kedro session (env local) inside ``project``."""
    with inside(project):
        return _root_conftest().run_session(project, pipelines, env="local", **kwargs)


def good_project_copy(target: Path) -> Path:
    """Project copy with conf/local = conf/ci + the GOOD symbol (no run yet)."""
    project = _root_conftest().make_project_copy(target)
    for ci_file in (project / "conf/ci").glob("*.yml"):
        shutil.copy(ci_file, project / "conf/local" / ci_file.name)
    (project / "conf/local/parameters_feature_extraction.yml").write_text(LOCAL_PARAMETERS)
    write_prices(project, good_prices())
    return project


def make_good_project(target: Path) -> Path:
    """:func:`good_project_copy` after one complete feature_extraction + env_construction run."""
    project = good_project_copy(target)
    run_session(project, ["feature_extraction", "env_construction"])
    return project


def copy_project(source: Path, target: Path) -> Path:
    """A fresh copy of a prepared project, so each fault case starts from the same data/."""
    shutil.copytree(source, target)
    return target


@contextmanager
def inside(project: Path):
    """Kedro resolves data/ against the working directory: run inside the project."""
    cwd = os.getcwd()
    os.chdir(project)
    try:
        yield
    finally:
        os.chdir(cwd)


def catalog(project: Path):
    """The project's catalog (env local), as a session would build it."""
    from kedro.framework.session import KedroSession

    bootstrap()
    with KedroSession.create(project_path=project, env="local") as session:
        return session.load_context().catalog


def commit(project: Path, name: str, data) -> str:
    """Save ``data`` as dataset ``name`` through the project's catalog, as an earlier completed run
    would have: a new version and that run's manifest. Returns the version."""
    with inside(project):
        dataset = catalog(project).get(name)
        dataset.save(data)
        version = dataset.resolve_save_version()
    manifest = project / MANIFESTS / version / MANIFESTS.name
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"save_version": version, "saved": {name: version}}))
    return version


def load(project: Path, name: str):
    with inside(project):
        return catalog(project).load(name)


def snapshot(project: Path) -> dict[str, str]:
    data = project / "data"
    return {
        str(path.relative_to(data)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(data.rglob("*"))
        if path.is_file()
    }


def completed_runs(project: Path) -> set[str]:
    folder = project / MANIFESTS
    return {path.name for path in folder.iterdir()} if folder.is_dir() else set()


def assert_no_run_completed(project: Path, before: dict[str, str], runs_before: set[str]) -> None:
    """A failed run may leave partial versions, but every earlier file is byte-identical and no run
    was recorded as complete, so no later run loads what it left."""
    after = snapshot(project)
    changed = [name for name, digest in before.items() if after.get(name) != digest]
    assert not changed, f"files changed or removed: {changed}"
    assert completed_runs(project) == runs_before


def assert_unchanged(project: Path, before: dict[str, str]) -> None:
    after = snapshot(project)
    assert after == before, {
        "added": sorted(set(after) - set(before)),
        "changed": sorted(name for name in before if after.get(name) != before[name]),
    }

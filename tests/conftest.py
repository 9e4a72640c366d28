"""Shared fixtures: a throw-away copy of the Kedro project so session tests never touch data/."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers import ci_default_run as default_run
from helpers.kedro_project import PROJECT_ROOT, bootstrap
from helpers.mlflow_store import add_empty_stores, copy_without_runs, empty_store, without_fsync
from helpers.shared_setup import run_root, shared_folder

os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")


def make_project_copy(target: Path, ci_data_root: str = "data") -> Path:
    """Copy pyproject.toml and conf/ (without conf/local contents) into ``target`` with empty data/.

    A throw-away copy is isolated already, so its ci runs write to ``data/`` like base runs (the
    tests address ``data/<layer>``); ``ci_data_root="data/ci"`` keeps ci's own root
    (tests/test_env_isolation.py)."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_ROOT / "pyproject.toml", target / "pyproject.toml")
    shutil.copytree(PROJECT_ROOT / "conf", target / "conf", ignore=shutil.ignore_patterns("local", "*.db"))
    (target / "conf" / "ci" / "globals.yml").write_text(f"data_root: {ci_data_root}\n")
    (target / "conf" / "local").mkdir(exist_ok=True)
    add_empty_stores(target)
    (target / "src").mkdir(exist_ok=True)  # the package itself is imported from the install
    for layer in (
        "01_raw/prices",
        "02_intermediate",
        "04_feature",
        "05_model_input",
        "06_models",
        "07_model_output",
        "08_reporting",
    ):
        (target / "data" / layer).mkdir(parents=True, exist_ok=True)
    return target


def run_session(project: Path, pipeline_names, env: str = "ci", run_options=None, **kwargs):
    """Run pipelines in a fresh KedroSession on ``project`` and return the run result, from inside
    ``project`` as ``kedro run`` runs: a relative ``sqlite:///...`` tracking URI names the project's
    store, not one in the checkout the tests run from. ``run_options`` go to ``session.run``
    (``to_outputs``: ``kedro run --to-outputs``), ``kwargs`` to ``KedroSession.create``."""
    import mlflow
    from kedro.framework.session import KedroSession

    bootstrap()
    cwd = os.getcwd()
    os.chdir(project)
    try:
        with KedroSession.create(project_path=project, env=env, **kwargs) as session:
            return session.run(pipeline_names=list(pipeline_names), **(run_options or {}))
    finally:
        os.chdir(cwd)
        # kedro-mlflow leaves the run open in-process; the next session must start its own.
        while mlflow.active_run() is not None:
            mlflow.end_run()


@pytest.fixture(scope="session")
def foundation_project(request) -> Path:
    """A project copy on which feature_extraction and env_construction ran once (ci env). Tests read
    it or run their sessions on a copy of it, so both xdist workers share one build."""

    def build(folder: Path) -> None:
        run_session(make_project_copy(folder), ["feature_extraction", "env_construction"])

    return shared_folder(request, "foundation", build)


@pytest.fixture(scope="session")
def sac_icm_project(request, foundation_project) -> Path:
    """A copy of the foundation project on which the ci ``sac_icm`` pipeline ran once: the sac_icm
    session test reads its outputs and the final_evaluation test evaluates a copy of its model (one
    training of the ci agent for the run; the auxiliary-heads test trains its own variant)."""

    def build(folder: Path) -> None:
        run_session(copy_without_runs(foundation_project, folder / "project"), ["sac_icm"])

    return shared_folder(request, "sac_icm", build) / "project"


@pytest.fixture(scope="session", autouse=True)
def _ci_default_run_started_early(request):
    """Start the default ci run with the suite when a selected test needs it, beside the first tests
    rather than as one long test late in the run (``helpers.ci_default_run``)."""
    if any("ci_default_run" in item.fixturenames for item in request.session.items):
        default_run.start(run_root(request), make_project_copy)
    yield
    default_run.finish()


@pytest.fixture(scope="session")
def ci_default_run(request) -> default_run.DefaultRun:
    """One default ``kedro run --env ci`` on a fresh project copy, in a fresh process, for the whole
    test run: the MLflow-run test reads its run and parse counts, the end-to-end serve test a copy of
    its project (started with the suite, above)."""
    return default_run.wait(run_root(request))


@pytest.fixture(scope="session")
def ray_session():
    """One local 2-CPU Ray for every test that needs it (starting Ray costs seconds)."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture
def project_copy():
    """Factory fixture: ``project_copy(path)`` makes a throw-away project copy there."""
    return make_project_copy


@pytest.fixture
def own_mlflow_store(tmp_path):
    """An empty MLflow store as the process-wide tracking URI for one test: code that reads or writes
    MLflow without a session (hooks, in-process pipelines) neither sees an earlier test's store nor
    creates ``mlflow.db`` in the checkout."""
    import mlflow

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(empty_store(tmp_path / "own_mlflow_store" / "mlflow.db"))
    yield
    mlflow.set_tracking_uri(previous)


@pytest.fixture
def kedro_run():
    """Factory fixture: ``kedro_run(project, [pipelines], env="ci")`` runs a session there."""
    return run_session


def pytest_configure(config):
    import torch

    torch.set_num_threads(1)  # as the project's default `torch_threads: 1`; tests share 2 cores
    without_fsync()  # MLflow's sqlite stores (helpers.mlflow_store)


# What a session, a benchmark or an MLflow call run from the checkout would write to: its data/ (the
# user's versions, ledger and ci store), its MLflow stores and the served model's default decision
# log. The suite must leave them as they were.
CHECKOUT_MLFLOW = ("mlflow.db", "mlruns", "mlartifacts", "trading_rl_decisions.jsonl")


def _checkout_state() -> dict[str, int | None]:
    """Modification time (ns) of every file under the checkout's data/ and of its MLflow stores."""
    state: dict[str, int | None] = {
        name: (path.stat().st_mtime_ns if path.exists() else None)
        for name in CHECKOUT_MLFLOW
        for path in [PROJECT_ROOT / name]
    }
    for path in (PROJECT_ROOT / "data").rglob("*"):
        state[str(path.relative_to(PROJECT_ROOT))] = path.stat().st_mtime_ns if path.is_file() else 0
    return state


def pytest_sessionstart(session):
    session.config.stash[_CHECKOUT_KEY] = _checkout_state()


def pytest_sessionfinish(session, exitstatus):
    """Fail the run when a test wrote into the checkout's data/ or MLflow stores (a test that ran a
    session, a command or an MLflow call without its own project copy or store)."""
    before = session.config.stash.get(_CHECKOUT_KEY, None)
    if before is None or hasattr(session.config, "workerinput"):  # the xdist controller checks once
        return
    after = _checkout_state()
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    if changed:
        session.config.get_terminal_writer().line(
            f"ERROR: the tests wrote into the checkout: {', '.join(changed[:10])} "
            "(give the test its own store, as tests/pipelines/validation/conftest.py does, or run it inside "
            "a project copy)",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_CHECKOUT_KEY = pytest.StashKey[dict]()

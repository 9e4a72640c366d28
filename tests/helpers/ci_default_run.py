"""One default ``kedro run --env ci`` (every phase of ``__default__``) for the tests that read it.

The MLflow-run test queries its run and the parses of each parameter section it made; the
end-to-end serve test promotes, forwards and serves the model it registered. Both ran their own ci
run before (about 45 s and 25 s of a 2-core VM). The run reads sp500 from a file without its newest
``HELD_BACK_BARS`` bars, so that the serve test's forward rerun has new bars to record.

It runs in a fresh Python process, as a ``kedro`` command does: MLflow keeps the store that a
relative ``sqlite:///`` URI first named for the life of a process, so a run inside a test worker
could log into an earlier test's project; here it logs into the project's own
``data/ci/mlflow.db``, which any worker reads by its absolute path. That process starts when the
suite does (``start``, once per test run), beside the first tests: under ``-n 2`` a test that
waited for it would hold a core for the whole run, at the end of the suite where nothing else is
left to share the cores."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SYMBOL = "sp500"
HELD_BACK_BARS = 5  # the newest bars of SYMBOL, not in the run's file: the serve test's new bars
FROM_A_FILE = {  # conf/ci's two symbols, SYMBOL read from data/01_raw/prices/<SYMBOL>.csv
    "feature_extraction": {"symbols": [{"name": SYMBOL, "source": "file"}, {"name": "nasdaq", "source": "packaged"}]}
}
FOLDER = "ci_default_run"  # under the test run's shared root: project/, the log and the outcome
RESULT, FAILED, LOG, PID = "result.json", "failed.txt", "run.log", "pid"
TIMEOUT_S = 540

_started: subprocess.Popen | None = None  # the run, where this process started it


@dataclass(frozen=True)
class DefaultRun:
    project: Path
    run_id: str
    parses: dict[str, int]  # parameter section -> times parsed during the run

    @property
    def tracking_uri(self) -> str:
        """The run's store by its absolute path (conf/ci/mlflow.yml's ``sqlite:///data/ci/mlflow.db``)."""
        return f"sqlite:///{self.project / 'data/ci/mlflow.db'}"


def start(root: Path, make_project_copy: Callable[[Path], Path]) -> None:
    """Start the run in the background under ``root`` unless a process of this test run did."""
    global _started
    folder = root / FOLDER
    with open(root / f"{FOLDER}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if folder.exists():
            return
        from trading_rl.data import load_prices

        project = make_project_copy(folder / "project")
        load_prices(SYMBOL).iloc[:-HELD_BACK_BARS].to_csv(project / f"data/01_raw/prices/{SYMBOL}.csv")
        tests = Path(__file__).resolve().parents[1]
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")])}
        with open(folder / LOG, "wb") as log:
            _started = subprocess.Popen(
                [sys.executable, "-m", "helpers.ci_default_run", str(project)],
                env=environment,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        (folder / PID).write_text(str(_started.pid))


def wait(root: Path) -> DefaultRun:
    """The run under ``root`` once it finished; an error with its log's end if it failed."""
    folder = root / FOLDER
    deadline = time.monotonic() + TIMEOUT_S
    while not (folder / RESULT).exists():
        if (folder / FAILED).exists() or not _running(folder):
            if (folder / RESULT).exists():  # it wrote its result, then ended, between the two checks
                break
            log = (folder / LOG).read_text(errors="replace")[-4000:]
            raise RuntimeError(f"the default ci run in {folder} failed:\n{log}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the default ci run in {folder} took over {TIMEOUT_S} s")
        time.sleep(0.5)
    result = json.loads((folder / RESULT).read_text())
    return DefaultRun(folder / "project", result["run_id"], result["parses"])


def finish() -> None:
    """Wait for the run if this process started it (another worker may still need it)."""
    if _started is not None:
        _started.wait(timeout=TIMEOUT_S)


def _running(folder: Path) -> bool:
    if _started is not None:
        return _started.poll() is None
    try:
        os.kill(int((folder / PID).read_text()), 0)  # another worker's child: does it exist?
    except ProcessLookupError:
        return False
    return True


def _run_counting_parses(project: Path) -> None:
    """The default ci run in ``project``, from inside it as ``kedro run`` runs; its run id and the
    parses of each parameter section (the resolution cache emptied first) go to ``RESULT``."""
    import mlflow
    import pytest
    from kedro.framework.session import KedroSession

    from helpers.kedro_project import bootstrap
    from helpers.mlflow_store import without_fsync
    from helpers.parse_count import count_section_parses

    bootstrap()
    without_fsync()  # as in the test processes
    os.chdir(project)
    with pytest.MonkeyPatch.context() as monkeypatch:
        parses = count_section_parses(monkeypatch)
        with KedroSession.create(project_path=project, env="ci", runtime_params=FROM_A_FILE) as session:
            session.run(pipeline_names=["__default__"])
    written = project.parent / f"{RESULT}.partial"
    written.write_text(json.dumps({"run_id": mlflow.last_active_run().info.run_id, "parses": dict(parses)}))
    written.rename(project.parent / RESULT)  # whole or not there for a waiting worker


if __name__ == "__main__":
    try:
        _run_counting_parses(Path(sys.argv[1]))
    except BaseException:
        (Path(sys.argv[1]).parent / FAILED).write_text(traceback.format_exc())
        raise

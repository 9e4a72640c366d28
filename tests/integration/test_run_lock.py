"""One `kedro run` per data root: a second run on a data folder that a live run holds is refused in
one sentence before anything starts, and a finished run frees the folder."""

from __future__ import annotations

import mlflow
import pytest

from trading_rl.file_lock import FileLock
from trading_rl.integration.run_lock import DataRootBusyError, lock_path


def written_files(project) -> list[str]:
    return sorted(
        str(path.relative_to(project))
        for path in (project / "data").rglob("*")
        if path.is_file() and path.name != "mlflow.db"  # the store opens with the context
    )


def last_run_id() -> str | None:
    """This process's last MLflow run, None when there is none in the current store (an earlier
    test's last run may live in a store that is no longer the current one)."""
    try:
        run = mlflow.last_active_run()
    except mlflow.exceptions.MlflowException:
        return None
    return None if run is None else run.info.run_id


@pytest.mark.slow
def test_a_second_run_on_a_held_data_root_is_refused_and_a_finished_run_frees_it(
    project_copy, kedro_run, tmp_path, monkeypatch
):
    project = project_copy(tmp_path / "project")
    monkeypatch.chdir(project)
    lock_path(project, "data").parent.mkdir(parents=True)
    other_run = FileLock(lock_path(project, "data"))
    assert other_run.acquire()
    other_run.note("pid 4242 on host, started 2026-11-27 10:00:00 UTC: kedro run --env research")
    before, last_run = written_files(project), last_run_id()
    with pytest.raises(DataRootBusyError) as refused:
        kedro_run(project, ["feature_extraction"])
    message = refused.value.format_message()
    assert "another run is writing to data/ (pid 4242" in message and "kedro run --env research" in message
    assert message.endswith("Nothing was run.") and "data_root" in message
    assert written_files(project) == before, "a refused run writes no version"
    assert last_run_id() == last_run, "a refused run starts no MLflow run"

    other_run.release()
    kedro_run(project, ["feature_extraction"])
    assert any(name.startswith("data/02_intermediate") for name in written_files(project))
    assert last_run_id() != last_run
    assert FileLock(lock_path(project, "data")).acquire(), "the finished run released the data root"

"""Fault suite, run states: Ctrl-C ends the MLflow run KILLED (it stayed FINISHED), a repeated
``--params`` (Kedro kept the last silently) and an unknown ``--env`` (an MLflow backend exception)
are refused in a plain sentence before anything runs."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.manifest_faults_setup import assert_unchanged, good_project_copy, snapshot
from helpers.mlflow_store import empty_store

from trading_rl import settings
from trading_rl.config import ConfigError
from trading_rl.integration.run_states import CommandLineError, RunStateHooks, check_config_env, check_params_once


@contextlib.contextmanager
def _run_under_the_hook(tmp_path, handler_before):
    """An MLflow run in a fresh store, stacked as kedro-mlflow stacks it (reopened per node), with
    ``RunStateHooks`` installed over ``handler_before``; yields ``(hooks, run id)``. Afterwards the
    hook's ``after_pipeline_run`` must have put ``handler_before`` back."""
    import mlflow

    while mlflow.active_run() is not None:  # left open by an earlier session in this process
        mlflow.end_run()
    previous_uri, outer_handler = mlflow.get_tracking_uri(), signal.getsignal(signal.SIGINT)
    # The handler before the hook is set explicitly (an earlier test in this process, Ray's start for
    # one, may leave SIGINT ignored).
    signal.signal(signal.SIGINT, handler_before)
    mlflow.set_tracking_uri(empty_store(tmp_path / "mlflow.db"))
    hooks = RunStateHooks()
    # an explicit experiment: an earlier Kedro session in this process leaves its experiment id active
    run = mlflow.start_run(experiment_id=mlflow.create_experiment("ctrl_c"))
    hooks.before_pipeline_run()
    for _ in range(2):  # kedro-mlflow's before_node_run reopens the run in every node: a stack of copies
        mlflow.start_run(run_id=run.info.run_id, nested=True)
    try:
        yield hooks, run.info.run_id
    finally:
        after = hooks.after_pipeline_run()  # a hook wrapper: the other after_pipeline_run hooks run at its yield
        next(after)
        # KeyboardInterrupt: after a Ctrl-C the wrapper raises it again (a real run never gets here
        # unless Python dropped it)
        with contextlib.suppress(StopIteration, KeyboardInterrupt):
            next(after)
        while mlflow.active_run() is not None:
            mlflow.end_run()
        mlflow.set_tracking_uri(previous_uri)
        restored = signal.signal(signal.SIGINT, outer_handler)
    assert restored == handler_before


def _status(store: Path, run_id: str) -> tuple[str, str | None]:
    """(status, ``trading_rl.ended_by`` tag) of a run, read from the store's database."""
    with contextlib.closing(sqlite3.connect(store)) as database:
        (status,) = database.execute("SELECT status FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
        tag = database.execute(
            "SELECT value FROM tags WHERE run_uuid = ? AND key = 'trading_rl.ended_by'", (run_id,)
        ).fetchone()
    return status, tag[0] if tag else None


@pytest.mark.slow
def test_ctrl_c_ends_the_mlflow_run_killed(tmp_path):
    import mlflow

    with _run_under_the_hook(tmp_path, signal.default_int_handler) as (_, run_id):
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
        still_active = mlflow.active_run()
    assert _status(tmp_path / "mlflow.db", run_id) == ("KILLED", "SIGINT") and still_active is None


@pytest.mark.slow
def test_a_ctrl_c_that_python_dropped_stops_the_run_at_the_next_node(tmp_path):
    """Python drops a KeyboardInterrupt raised inside a weakref callback or ``__del__``: a real
    feature_extraction run then ran on and ended FINISHED (2 of 5 Ctrl-Cs)."""
    import mlflow

    with _run_under_the_hook(tmp_path, signal.default_int_handler) as (hooks, run_id):
        try:
            os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt:
            pass  # what "Exception ignored in: <function WeakValueDictionary...remove>" does
        mlflow.start_run(run_id=run_id, nested=True)  # kedro-mlflow reopens the run for the next node
        with pytest.raises(KeyboardInterrupt, match="Ctrl-C"):
            hooks.before_node_run()
        still_active = mlflow.active_run()
    assert _status(tmp_path / "mlflow.db", run_id) == ("KILLED", "SIGINT") and still_active is None


@pytest.mark.slow
def test_an_ignored_sigint_leaves_the_run_running(tmp_path):
    import mlflow

    with _run_under_the_hook(tmp_path, signal.SIG_IGN) as (hooks, run_id):
        os.kill(os.getpid(), signal.SIGINT)
        hooks.before_node_run()  # nothing to raise
        still_active = mlflow.active_run()
    assert still_active is not None and still_active.info.run_id == run_id


HELD_KEDRO_RUN = Path(__file__).resolve().parents[1] / "helpers" / "held_kedro_run.py"

# Where a real run is held when the SIGINT arrives (tests/helpers/held_kedro_run.py): the signal
# used to go out when the log named the first node, and a ci run that had already finished by then
# exited 0 (a race); now the run is known to be at the point until the signal lands.
CTRL_C_POINTS = [
    "before_first_node",
    "in_node:feature_extraction.load_and_validate_prices",
    "after_node:feature_extraction.load_and_validate_prices",
    "after_pipeline_run",
]


@contextlib.contextmanager
def _sigint_not_ignored():
    """Start a child as a terminal would: a child inherits an *ignored* SIGINT (an earlier test in
    this worker, Ray's start for one, may leave it so), and Python then never raises
    KeyboardInterrupt in it (a fresh-clone suite run failed all four points that way)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.slow
@pytest.mark.parametrize("point", CTRL_C_POINTS)
def test_ctrl_c_on_a_real_kedro_run_exits_with_its_mlflow_run_killed(tmp_path, project_copy, point):
    """The whole path: ``kedro run`` in a process of its own, held at ``point``, then SIGINT."""
    project = project_copy(tmp_path / "project")
    with _sigint_not_ignored():
        process = subprocess.Popen(
            [sys.executable, str(HELD_KEDRO_RUN), "run", "--env", "ci", "--pipelines", "feature_extraction"],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "TRADING_RL_HOLD_AT": point},
        )
    output, interrupted = [], False
    try:
        for line in process.stdout:  # type: ignore[union-attr]
            output.append(line)
            if line.startswith(f"HELD AT {point}"):
                process.send_signal(signal.SIGINT)
                interrupted = True
                break
        output.append(process.communicate(timeout=300)[0])
    finally:
        process.kill()
    log = "".join(output)
    assert interrupted and process.returncode != 0, log[-3000:]
    assert "released at" not in log, log[-3000:]
    with contextlib.closing(sqlite3.connect(project / "data/ci/mlflow.db")) as database:
        (run_id,) = database.execute("SELECT run_uuid FROM runs").fetchone()
    assert _status(project / "data/ci/mlflow.db", run_id) == ("KILLED", "SIGINT"), log[-3000:]


@pytest.mark.parametrize(
    "argv",
    [
        ["kedro", "run", "--params", "seed=abc", "--params", "torch_threads=1"],
        ["/venv/bin/kedro", "run", "--params=seed=abc", "--env", "ci", "--params", "torch_threads=1"],
    ],
)
def test_repeated_params_are_refused_with_the_one_option_form(argv):
    with pytest.raises(ConfigError) as raised:
        check_params_once(argv)
    message = str(raised.value)
    assert "--params was given 2 times" in message and "'seed=abc'" in message and "'torch_threads=1'" in message
    assert 'Fix: give them in one option, `--params "seed=abc,torch_threads=1"`' in message


def test_one_params_option_and_other_commands_pass():
    check_params_once(["kedro", "run", "--params", "seed=1,torch_threads=1"])
    check_params_once(["pytest", "--params", "a", "--params", "b"])


def test_a_refused_command_line_is_a_config_error_that_click_prints_alone():
    """Inside ``kedro run`` click prints ``Error: <message>`` and exits 1; from Python it is a ConfigError."""
    import click

    assert issubclass(CommandLineError, ConfigError) and issubclass(CommandLineError, click.ClickException)
    with pytest.raises(CommandLineError) as raised:
        check_params_once(["kedro", "run", "--params", "a=1", "--params", "b=2"])
    assert str(raised.value) == raised.value.message and raised.value.exit_code == 1


def test_an_unknown_env_is_refused_naming_the_known_ones(tmp_path):
    for env in ("base", "ci", "local"):
        (tmp_path / "conf" / env).mkdir(parents=True)
    check_config_env(tmp_path, "ci")
    check_config_env(tmp_path, None)
    with pytest.raises(ConfigError, match=r"--env cii: there is no conf/cii folder.*\['ci', 'local'\].*--env ci"):
        check_config_env(tmp_path, "cii")


def test_the_env_check_runs_before_kedro_mlflow():
    """kedro-mlflow's own after_context_created failed first with a tracking-backend error."""
    hooks = [hook for hook in settings.HOOKS if isinstance(hook, RunStateHooks)]
    assert len(hooks) == 1
    assert RunStateHooks.after_context_created.kedro_impl["tryfirst"] is True
    # the Ctrl-C handler is in place before kedro-mlflow starts the MLflow run, and stays until the
    # last after_pipeline_run hook (the run manifest) is done
    assert RunStateHooks.before_pipeline_run.kedro_impl["tryfirst"] is True
    assert RunStateHooks.after_pipeline_run.kedro_impl["hookwrapper"] is True


@pytest.mark.slow
def test_kedro_run_with_an_unknown_env_ends_in_the_plain_sentence(tmp_path):
    project = good_project_copy(tmp_path / "project")
    before = snapshot(project)
    kedro = Path(sys.executable).with_name("kedro")
    result = subprocess.run(
        [str(kedro), "run", "--env", "cii", "--pipelines", "feature_extraction"],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1"},
        timeout=300,
    )
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("Error: --env cii: there is no conf/cii folder"), result.stderr[-2000:]
    assert "environments ['ci', 'gpu', 'local'" in last_line and "`--env ci`" in last_line, last_line
    # the clear message alone: Kedro printed its whole traceback first
    assert "Traceback" not in result.stderr and "ConfigError" not in result.stderr, result.stderr[-2000:]
    assert_unchanged(project, before)

"""Clean run states: what Kedro would run silently wrong is refused in a plain sentence, and Ctrl-C
ends the MLflow run ``KILLED``.

- ``--env NAME`` without a ``conf/NAME`` folder: Kedro would run on ``conf/base`` alone and
  kedro-mlflow would fail with an unrelated tracking-backend error; refused first (``tryfirst``).
- ``--params`` given twice: Kedro keeps only the last one; refused, with the one-option form.
- SIGINT (Ctrl-C) raises ``KeyboardInterrupt``, which is not an ``Exception``: kedro-mlflow's
  ``on_pipeline_error`` never runs and MLflow's exit handler would end the run ``FINISHED``. The
  handler installed for the run ends it ``KILLED`` first. Python drops a ``KeyboardInterrupt`` raised
  while it runs a weakref callback or a ``__del__`` ("Exception ignored in ..."): the pipeline then
  ran on and kedro-mlflow reopened and finished the run (seen in 2 of 5 Ctrl-Cs of a real
  ``feature_extraction`` run), so the interrupt is raised again at the next node boundary. SIGKILL is
  handled at the next start (``hooks.MlflowRunHygieneHooks``).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from kedro.framework.hooks import hook_impl

from trading_rl.config import ConfigError

logger = logging.getLogger(__name__)


class CommandLineError(ConfigError, click.ClickException):
    """A refused command line. Raised inside ``kedro run`` (a hook), click prints its message alone,
    ``Error: <message>``, and exits with status 1; it printed Kedro's whole traceback first. Callers
    from Python (a session in a notebook or a test) get it as the :class:`ConfigError` it also is."""

    def __init__(self, message: str) -> None:
        click.ClickException.__init__(self, message)


def check_config_env(project_path: Path, env: str | None) -> None:
    """Refuse a ``--env`` whose ``conf/<env>`` folder does not exist, listing the ones that do."""
    if env is None or (project_path / "conf" / env).is_dir():
        return
    known = sorted(p.name for p in (project_path / "conf").iterdir() if p.is_dir() and p.name != "base")
    raise CommandLineError(
        f"--env {env}: there is no conf/{env} folder, so the run would use conf/base alone. Nothing was run. "
        f"Fix: use one of the environments {known} (e.g. `--env ci`), or create conf/{env}/."
    )


def repeated_params(argv: Sequence[str]) -> list[str]:
    """The values of every ``--params`` option in a ``kedro run`` command line (both spellings)."""
    values = []
    for position, argument in enumerate(argv):
        if argument == "--params" and position + 1 < len(argv):
            values.append(argv[position + 1])
        elif argument.startswith("--params="):
            values.append(argument.removeprefix("--params="))
    return values


def check_params_once(argv: Sequence[str]) -> None:
    """Refuse ``kedro run`` with ``--params`` more than once (Kedro would drop all but the last)."""
    if len(argv) < 2 or Path(argv[0]).name != "kedro" or argv[1] != "run":
        return
    values = repeated_params(argv)
    if len(values) > 1:
        raise CommandLineError(
            f"--params was given {len(values)} times ({', '.join(repr(v) for v in values)}); Kedro keeps only the "
            f"last and would drop the others silently. Nothing was run. Fix: give them in one option, "
            f'`--params "{",".join(values)}"`.'
        )


def end_mlflow_run_killed(ended_run_id: str | None = None) -> None:
    """End the active MLflow run ``KILLED`` (what SIGINT does before it interrupts the run). With no
    active run, ``ended_run_id`` (the pipeline's run, which kedro-mlflow's ``after_pipeline_run`` may
    have ended ``FINISHED`` before the project's last hooks wrote the run manifest) is set ``KILLED``."""
    import mlflow

    run = mlflow.active_run()
    if run is None and ended_run_id is not None:
        client = mlflow.MlflowClient()
        client.set_tag(ended_run_id, "trading_rl.ended_by", "SIGINT")
        client.set_terminated(ended_run_id, status="KILLED")
        logger.warning("interrupted: MLflow run %s ended KILLED", ended_run_id)
        return
    if run is not None:
        mlflow.set_tag("trading_rl.ended_by", "SIGINT")
        # kedro-mlflow reopens the pipeline's run for every node (``before_node_run``, nested), so
        # this thread's stack holds it once per node run so far: ending one copy left the next for
        # MLflow's exit handler, which ended the run FINISHED.
        while mlflow.active_run() is not None:
            mlflow.end_run(status="KILLED")
        logger.warning("interrupted: MLflow run %s ended KILLED", run.info.run_id)


class RunStateHooks:
    def __init__(self) -> None:
        self._previous_handler: Any = None
        self._interrupted = False
        self._ended_run_id: str | None = None

    @hook_impl(tryfirst=True)
    def after_context_created(self, context) -> None:
        check_config_env(Path(context.project_path), context.env)
        check_params_once(sys.argv)

    # tryfirst: installed before kedro-mlflow's before_pipeline_run starts the MLflow run (a Ctrl-C
    # while it started the run and logged the parameters left the run to MLflow's exit handler,
    # which ended it FINISHED); only RunLockHooks' refusal comes first, and it starts nothing.
    @hook_impl(tryfirst=True)
    def before_pipeline_run(self) -> None:
        self._interrupted = False
        self._ended_run_id = None
        if threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        """End the MLflow run ``KILLED``, then interrupt as the handler before this one would (an
        ignored SIGINT stays ignored: the run goes on, so it is not ended)."""
        previous = self._previous_handler
        if previous == signal.SIG_IGN:
            return
        self._interrupted = previous in (signal.SIG_DFL, signal.default_int_handler)
        end_mlflow_run_killed(self._ended_run_id)
        if callable(previous):
            previous(signum, frame)
        else:
            signal.default_int_handler(signum, frame)

    @hook_impl
    def before_node_run(self) -> None:
        self._raise_if_interrupted()

    @hook_impl
    def after_node_run(self) -> None:
        self._raise_if_interrupted()

    def _raise_if_interrupted(self) -> None:
        """Raise the Ctrl-C that Python dropped (above) at the node boundary, ending any copy of the
        run that kedro-mlflow reopened since."""
        if self._interrupted:
            end_mlflow_run_killed()
            raise KeyboardInterrupt("Ctrl-C: the run was interrupted (its MLflow run ended KILLED)")

    # A wrapper around every after_pipeline_run: the handler stays until the last of them (the run
    # manifest) is done, so a Ctrl-C while they run still ends the MLflow run KILLED, even after
    # kedro-mlflow's own after_pipeline_run has ended it.
    @hook_impl(hookwrapper=True)
    def after_pipeline_run(self) -> Any:
        import mlflow

        run = mlflow.active_run()
        self._ended_run_id = run.info.run_id if run is not None else None
        try:
            yield
        finally:
            self._restore()
            self._ended_run_id = None
        if self._interrupted:  # a Ctrl-C that Python dropped while the hooks ran
            raise KeyboardInterrupt("Ctrl-C: the run was interrupted (its MLflow run ended KILLED)")

    @hook_impl
    def on_pipeline_error(self) -> None:
        self._restore()

    def _restore(self) -> None:
        if self._previous_handler is not None:
            signal.signal(signal.SIGINT, self._previous_handler)
            self._previous_handler = None

"""MLflow runs whose process died without ending them (SIGKILL, OOM killer, power loss).

MLflow leaves such a run ``RUNNING`` forever. Each run records its host and process id as tags at
start; the next start on the same host ends every ``RUNNING`` run of the experiment whose process
is gone as ``KILLED``. Runs from other hosts, or without the tags, are left alone: whether their
process lives cannot be told from here.
"""

from __future__ import annotations

import os
import socket
from typing import Any

HOST_TAG = "trading_rl.host"
PID_TAG = "trading_rl.pid"
ENDED_BY_TAG = "trading_rl.ended_by"


def process_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists on this host (signal 0 checks without sending)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def process_tags() -> dict[str, str]:
    """The tags ``end_dead_runs`` needs on a run: this host and this process."""
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}


def end_dead_runs(client: Any, experiment_id: str, exclude_run_id: str | None = None) -> list[str]:
    """Set every ``RUNNING`` run of ``experiment_id`` started on this host by a process that no
    longer exists to ``KILLED``; returns their run ids. ``client`` is an ``mlflow.MlflowClient``."""
    host = socket.gethostname()
    ended = []
    for run in client.search_runs([experiment_id], filter_string="attributes.status = 'RUNNING'"):
        tags = run.data.tags
        if run.info.run_id == exclude_run_id or tags.get(HOST_TAG) != host:
            continue
        pid = tags.get(PID_TAG, "")
        if not pid.isdigit() or process_alive(int(pid)):
            continue
        client.set_tag(run.info.run_id, ENDED_BY_TAG, f"process {pid} on {host} was gone at the next start")
        client.set_terminated(run.info.run_id, status="KILLED")
        ended.append(run.info.run_id)
    return ended

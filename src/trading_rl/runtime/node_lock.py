"""One node at a time in the kedro process, except while a node waits on remote work.

Why: torch's and NumPy's global random generators and pyplot's figure registry are process-wide,
so two nodes computing in threads at once draw from each other's streams (a ThreadRunner run of
the project differs from the sequential run in every trained model) and close each other's figures.
What may overlap is waiting: a node whose tasks run in Ray workers holds nothing in this process
while it waits for them, and another node can compute meanwhile. A runner holds ``node_lock`` for
each whole node (inputs, run, outputs); the Ray engine gives it up inside ``released_while_waiting``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_LOCK = threading.Lock()
_held = threading.local()


@contextlib.contextmanager
def node_lock() -> Iterator[None]:
    """Run the block as the only node computing in this process."""
    with _LOCK:
        _held.value = True
        try:
            yield
        finally:
            _held.value = False


def holds_node_lock() -> bool:
    """Whether this thread is inside ``node_lock`` (and not waiting inside ``released_while_waiting``)."""
    return getattr(_held, "value", False)


@contextlib.contextmanager
def released_while_waiting() -> Iterator[None]:
    """Let another node compute while this thread only waits (for remote tasks); a no-op outside
    ``node_lock`` (sequential runner, scripts)."""
    if not holds_node_lock():
        yield
        return
    _held.value = False
    _LOCK.release()
    try:
        yield
    finally:
        _LOCK.acquire()
        _held.value = True

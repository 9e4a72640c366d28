"""One node at a time in the kedro process, except while a node waits on remote work.

Why: torch's and NumPy's global random generators and pyplot's figure registry are process-wide,
so two nodes computing in threads at once draw from each other's streams (a ThreadRunner run of
the project differs from the sequential run in every trained model) and close each other's figures.
What may overlap is waiting: a node whose tasks run in Ray workers holds nothing in this process
while it waits for them, and another node can compute meanwhile. A runner holds ``node_lock`` for
each whole node (inputs, run, outputs); the Ray engine gives it up inside ``released_while_waiting``
(for maps marked ``others_may_compute``: the walk-forward's chains, a symbol's training).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_STATE = threading.Condition()
_busy = False  # a node computes
_returning = 0  # nodes whose remote wait is over, waiting for their turn back
_held = threading.local()


def _acquire(returning: bool) -> None:
    """Wait for the turn; a node back from its remote wait goes before nodes not yet started, so
    that it hands out its next remote work as soon as the node computing now is done."""
    global _busy, _returning
    with _STATE:
        if returning:
            _returning += 1
        try:
            _STATE.wait_for(lambda: not _busy and (returning or _returning == 0))
        finally:
            if returning:
                _returning -= 1
        _busy = True
    _held.value = True


def _release() -> None:
    global _busy
    _held.value = False
    with _STATE:
        _busy = False
        _STATE.notify_all()


@contextlib.contextmanager
def node_lock() -> Iterator[None]:
    """Run the block as the only node computing in this process."""
    _acquire(returning=False)
    try:
        yield
    finally:
        _release()


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
    _release()
    try:
        yield
    finally:
        _acquire(returning=True)

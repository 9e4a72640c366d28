"""``kedro <args>`` with one test hook more, which holds the run at a known point until it is
interrupted, so a test's SIGINT lands there and nowhere else (tests/faults/test_faults_run_states.py).

``TRADING_RL_HOLD_AT`` names the point:

- ``before_first_node``: after every ``before_pipeline_run`` hook (the MLflow run is started);
- ``in_node:<name>``: inside the node's own function, before it computes;
- ``after_node:<name>``: after every ``after_node_run`` hook of that node, before the next node;
- ``after_pipeline_run``: in the ``after_pipeline_run`` hooks, after kedro-mlflow's has ended the
  MLflow run and before the run manifest is written.

At the point it prints ``HELD AT <point>`` (flushed) and waits, interruptible, for at most
``HOLD_SECONDS``; then it lets the run go on, so a test that never signals fails instead of hanging.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from typing import Any

from kedro.framework.hooks import hook_impl

HOLD_SECONDS = 120.0
POINT = os.environ.get("TRADING_RL_HOLD_AT", "")


def hold(point: str) -> None:
    print(f"HELD AT {point}", flush=True)
    deadline = time.monotonic() + HOLD_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.01)  # the main thread sleeps here: a SIGINT interrupts it at once
    print(f"released at {point} after {HOLD_SECONDS} s without a signal", flush=True)


class HoldHooks:
    @hook_impl(trylast=True)
    def before_pipeline_run(self) -> None:
        if POINT == "before_first_node":
            hold(POINT)

    @hook_impl
    def before_node_run(self, node: Any) -> None:
        if POINT == f"in_node:{node.name}":
            func = node.func

            @functools.wraps(func)
            def held(*args: Any, **kwargs: Any) -> Any:
                hold(POINT)
                return func(*args, **kwargs)

            node.func = held

    @hook_impl(trylast=True)
    def after_node_run(self, node: Any) -> None:
        if POINT == f"after_node:{node.name}":
            hold(POINT)

    @hook_impl
    def after_pipeline_run(self) -> None:
        if POINT == "after_pipeline_run":
            hold(POINT)


if __name__ == "__main__":
    from kedro.framework.cli.cli import main

    from trading_rl import settings

    settings.HOOKS = (*settings.HOOKS, HoldHooks())
    sys.argv = ["kedro", *sys.argv[1:]]
    main()

"""No silent minute: the log-gap parser, and the heartbeat that fills a silent stretch of a node."""

from __future__ import annotations

import logging
import time

import pytest
from kedro.framework.hooks.manager import _create_hook_manager
from kedro.io import DataCatalog
from kedro.pipeline import Node, Pipeline
from kedro.runner import SequentialRunner
from log_gaps import log_gaps

from trading_rl.integration.hooks import ProgressHooks

LOG = """2026-11-27 13:00:40,731 INFO kedro.framework.project: Using 'conf/logging.yml'
2026-11-27 13:00:44,981 INFO kedro.framework.session.session: Kedro project trading_rl
Traceback (most recent call last):  [no timestamp: skipped]
2026-11-27 13:02:10,000 INFO trading_rl.phases.walk_forward: walk_forward: chain 1/4 done after 85 s
2026/11/27 13:02:11 INFO mlflow.store.db.utils: another format, skipped
2026-11-27 13:02:20,500 INFO kedro.runner.sequential_runner: Completed 3 out of 9 tasks
"""


def test_the_parser_finds_the_longest_silence_between_timestamped_lines():
    gaps = log_gaps(LOG.splitlines())
    assert [gap.seconds for gap in gaps] == [85.019, 10.5, 4.25]
    assert gaps[0].before.endswith("Kedro project trading_rl") and "chain 1/4 done" in gaps[0].after


@pytest.mark.slow
def test_a_silent_node_gets_a_still_running_line_within_the_interval(caplog):
    hooks = ProgressHooks(interval=0.6)
    manager = _create_hook_manager()
    manager.register(hooks)
    pipeline = Pipeline([Node(lambda: time.sleep(2.5) or 1, None, "x", name="silent_training")])
    with caplog.at_level(logging.INFO, logger="trading_rl.integration.hooks"):
        manager.hook.before_pipeline_run(run_params={}, pipeline=pipeline, catalog=DataCatalog())
        SequentialRunner().run(pipeline, DataCatalog(), manager)
        manager.hook.after_pipeline_run(run_params={}, run_result={}, pipeline=pipeline, catalog=DataCatalog())
    beats = [r for r in caplog.records if r.getMessage().startswith("still running: silent_training")]
    assert 2 <= len(beats) <= 4  # one per 0.6 s without another line (each beat counts as a line)
    assert all(b - a >= 0.55 for a, b in zip([r.created for r in beats], [r.created for r in beats][1:]))

"""Project hooks: a run whose validation gates failed ends with a WARNING naming them."""

from __future__ import annotations

import logging

from kedro.framework.hooks.manager import _create_hook_manager
from kedro.io import DataCatalog
from kedro.pipeline import Node, Pipeline
from kedro.runner import SequentialRunner

from trading_rl import settings
from trading_rl.evaluation.gates import evaluate_gates
from trading_rl.hooks import ValidationGateHooks
from trading_rl.pipelines.validation.nodes import enforce_gates

GATES = {
    "max_drawdown": {"metric": "max_drawdown_median", "comparison": "<", "threshold": 0.15},
    "sharpe": {"metric": "sharpe_median", "comparison": ">", "threshold": 0.5},
}
IDLE = {"windows": 9.0, "idle_windows": 9.0, "max_drawdown_median": None, "sharpe_median": None}
NAMED = "validation gates failed: max_drawdown (agent never traded in 9 of 9 windows"


def _run(report: dict, with_validation: bool = True) -> None:
    """A run like ``kedro run``: the runner fires the node hooks, the session ``after_pipeline_run``."""
    hook_manager = _create_hook_manager()
    hook_manager.register(ValidationGateHooks())
    nodes = [Node(lambda: "done", inputs=None, outputs="other", name="later_node")]
    if with_validation:
        nodes += [
            Node(lambda: report, inputs=None, outputs="validation_report", name="build_validation_report"),
            Node(enforce_gates, inputs=["validation_report", "comparison", "params:validation"], outputs=None,
                 name="enforce_validation_gates"),
        ]
    pipeline = Pipeline(nodes)
    catalog = DataCatalog()
    catalog["comparison"] = {}
    catalog["params:validation"] = {"fail_on_gate": False}
    hook_manager.hook.before_pipeline_run(run_params={}, pipeline=pipeline, catalog=catalog)
    SequentialRunner().run(pipeline, catalog, hook_manager)
    logging.getLogger("trading_rl.other").info("a node logs after the gates")
    hook_manager.hook.after_pipeline_run(run_params={}, run_result={}, pipeline=pipeline, catalog=catalog)


def test_failed_gates_are_warned_by_the_node_and_again_as_the_last_line_of_the_run(caplog):
    with caplog.at_level(logging.INFO):
        _run(evaluate_gates(IDLE, GATES))
    last = caplog.records[-1]
    assert last.levelno == logging.WARNING and last.name == "trading_rl.hooks"
    assert NAMED in last.getMessage() and "sharpe ('sharpe_median' is undefined)" in last.getMessage()
    from_node = [r for r in caplog.records if r.name == "trading_rl.pipelines.validation.nodes"]
    assert [r.levelno for r in from_node] == [logging.WARNING] and NAMED in from_node[0].getMessage()


def test_passing_gates_and_runs_without_validation_say_nothing(caplog):
    passing = evaluate_gates({"max_drawdown_median": 0.05, "sharpe_median": 1.0}, GATES)
    with caplog.at_level(logging.INFO):
        _run(passing)
        _run(evaluate_gates(IDLE, GATES), with_validation=False)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_hook_is_registered_in_the_project_settings():
    assert any(isinstance(hook, ValidationGateHooks) for hook in settings.HOOKS)

"""The one evaluation step every phase with a trained agent ends with: its tearsheet.

``tearsheet_node`` wraps a phase's own ``sections`` function (which rolls out that phase's agents
its way: an SB3 model, the hierarchical agent, migrated checkpoints, the walk-forward's stored
test steps) into a node that saves ``<prefix>_rollout`` (parquet), ``<prefix>_tearsheet_plot``
(one PNG per section) and ``<prefix>_tearsheet`` (self-contained HTML), all versioned
(``evaluation.reporting.phase_tearsheet`` renders them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
from kedro.pipeline import Node

from trading_rl.evaluation.reporting.phase_tearsheet import TearsheetInput, render_tearsheet
from trading_rl.evaluation.reporting.tearsheet import tearsheet_outputs
from trading_rl.pipelines.typed_node import typed

TEARSHEET_PARAMS = "params:tearsheet"


def tearsheet_node(
    prefix: str,
    sections: Callable[..., TearsheetInput],
    inputs: list[str],
    ledger: str = "prior_trial_ledger",
    gates: Sequence[str] = (),
) -> Node:
    """A node ``render_<prefix>_tearsheet``: ``sections(*inputs)`` then ``render_tearsheet``, with
    the ``gates`` reports (``evaluation.reporting.summary.GATE_REPORTS`` names) as the page's verdict banner;
    ``sections`` receives typed parameter sections (``typed_node.typed``)."""

    def node_function(*args: Any) -> tuple[pd.DataFrame, dict[str, Any], str]:
        split = len(args) - len(gates)
        *phase_inputs, config, trial_ledger, run_metadata = args[:split]
        reports = dict(zip(gates, args[split:]))
        return render_tearsheet(sections(*phase_inputs), config, trial_ledger, run_metadata, reports)

    # Named after the phase's function for kedro-viz; Kedro checks the inputs against this function's
    # own ``*args`` signature (``sections`` is not its ``__wrapped__``).
    node_function.__name__ = node_function.__qualname__ = sections.__name__
    node_function.__doc__ = sections.__doc__

    all_inputs = [*inputs, TEARSHEET_PARAMS, ledger, "run_metadata", *gates]
    return Node(
        typed(node_function, all_inputs),
        inputs=all_inputs,
        outputs=tearsheet_outputs(prefix),
        name=f"render_{prefix}_tearsheet",
        tags=["report"],
    )

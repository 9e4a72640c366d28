"""One symbol check for every phase: what a node loads must be for ``env_construction.symbol``.

That parameter names the run and its MLflow tags, so a phase that loaded another symbol's env spec,
feature parameters, scalers, prices or walk-forward returns would train or report on one symbol under
another's name. :class:`PhaseInputHooks` checks a node's loaded inputs before the node runs, so the
first node of a phase that loads one (``sac_icm``, ``options_her``, ``reward_shaper``,
``regime_validation``, ``export``, ``walk_forward``, ``final_evaluation`` …) refuses before anything
is written, with the checks of ``envs.compatibility`` that name both sides and the fix. The model
against its spec is checked by ``check_model_fits_spec`` in those phases' nodes; ``forward``'s deployed
model must trade the symbol (``check_deployed_model_symbol``), and forward checks it against the spec it
rebuilds from the model's own metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from kedro.framework.hooks import hook_impl

from trading_rl.envs.compatibility import check_deployed_model_symbol, check_spec_symbol, check_symbol_entry
from trading_rl.integration.parameter_sections import configured_symbol

ENV_PARAMS = "params:env_construction"
# Per-symbol datasets checked next to an env spec (the phase reads the spec's symbol from them).
WITH_SPEC = ("feature_params", "scalers")


def _symbols(data: Any) -> Mapping[str, Any] | None:
    """``{symbol: ...}`` of a long frame (``symbol`` column) or a per-symbol mapping, else ``None``."""
    if isinstance(data, pd.DataFrame):
        return dict.fromkeys(data["symbol"].unique()) if "symbol" in data.columns else None
    return data if isinstance(data, Mapping) else None


def check_phase_inputs(inputs: Mapping[str, Any], symbol: str, pipeline: str) -> None:
    """Raise ``ModelCompatibilityError`` when an input of a node is not for ``symbol``."""
    if "env_spec" in inputs:
        check_spec_symbol(inputs["env_spec"], symbol, pipeline=pipeline)
        checked = [name for name in WITH_SPEC if name in inputs]
    else:
        checked = []
    if inputs.get("deployed_model") is not None:  # None: nothing promoted, forward reports "not checked"
        check_deployed_model_symbol(inputs["deployed_model"], symbol, pipeline=pipeline)
    if "walk_forward_returns" in inputs:
        checked.append("walk_forward_returns")
    if "prices" in inputs and ENV_PARAMS in inputs:  # a phase that runs on prices by env settings
        checked.append("prices")
    for name in checked:
        entries = _symbols(inputs[name])
        if entries is not None and (name != "walk_forward_returns" or len(entries)):
            check_symbol_entry(entries, symbol, dataset=name, pipeline=pipeline)


class PhaseInputHooks:
    @hook_impl
    def before_node_run(self, node, catalog, inputs: dict[str, Any]) -> None:
        symbol = configured_symbol(catalog)
        if symbol is None:
            return
        pipeline = (node.namespace or node.name).split(".")[0]
        check_phase_inputs(inputs, symbol, pipeline)

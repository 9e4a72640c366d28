"""Project pipelines: one folder per phase under ``pipelines/``, found automatically."""

from __future__ import annotations

from kedro.framework.project import find_pipelines
from kedro.pipeline import Pipeline

# Opt-in pipelines that the default run leaves out: multi_symbol trains one agent per configured
# symbol, which multiplies the default run's time by the number of symbols; final_evaluation spends
# the test split, which must be a deliberate, once-per-configuration decision (docs/protocol.md).
NOT_IN_DEFAULT = frozenset({"multi_symbol", "final_evaluation"})


def register_pipelines() -> dict[str, Pipeline]:
    pipelines = find_pipelines(raise_errors=True)
    pipelines["__default__"] = sum(
        (pipeline for name, pipeline in pipelines.items() if name not in NOT_IN_DEFAULT), Pipeline([])
    )
    return pipelines

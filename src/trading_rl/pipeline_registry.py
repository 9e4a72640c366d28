"""Project pipelines: one folder per phase under ``pipelines/``, each registered as a namespaced
modular pipeline (its nodes under the phase's namespace, so Kedro-Viz opens ``__default__`` as one
expandable box per phase). Dataset and parameter names are not prefixed: the catalog, ``--load-versions``
and the phases that read each other's outputs keep working unchanged. Node names become
``<phase>.<node>`` (``kedro run --namespaces sac_icm`` runs one phase's nodes).
"""

from __future__ import annotations

import importlib
from difflib import get_close_matches
from importlib import resources

import click
from kedro.pipeline import Pipeline

# Opt-in pipelines that the default run leaves out: multi_symbol trains one agent per configured
# symbol, which multiplies the default run's time by the number of symbols; final_evaluation spends
# the test split, which must be a deliberate, once-per-configuration decision (docs/protocol.md);
# tuning runs a walk-forward per trial (docs/tuning.md); promote changes what is deployed, a decision
# a person makes on a registered version.
NOT_IN_DEFAULT = frozenset({"multi_symbol", "final_evaluation", "tuning", "promote"})

# Every node carries at least one role tag (``kedro run --tags plot``, Kedro-Viz's tag filter).
ROLE_TAGS = frozenset({"data", "train", "evaluate", "report", "plot", "export"})


class PipelineRegistry(dict):
    """The registered pipelines; an unknown name is a one-line CLI error with Kedro's "did you
    mean" suggestions (Kedro itself raises a ValueError whose traceback buries the suggestion)."""

    def __missing__(self, name: str):
        matches = get_close_matches(name, self.keys())
        suggestion = "Did you mean one of these instead?\n" + "\n".join(f"    {m}" for m in matches) if matches else ""
        raise click.ClickException(
            f"Failed to find the pipeline named '{name}'. Registered: {', '.join(sorted(self))}. {suggestion}"
        )


def phase_names() -> list[str]:
    """The pipeline folders under ``trading_rl/pipelines``."""
    folders = resources.files("trading_rl.pipelines").iterdir()
    return sorted(f.name for f in folders if f.is_dir() and not f.name.startswith(("_", ".")))


def namespaced(pipelines: dict[str, Pipeline]) -> dict[str, Pipeline]:
    """Each pipeline with its nodes under its own name as namespace. A node shared by several
    pipelines (``validation`` = ``walk_forward`` + ``regime_validation`` + its own nodes) belongs
    to the smallest of them, so the phases compose without a node existing twice."""
    owner: dict[str, str] = {}
    for name, pipeline in sorted(pipelines.items(), key=lambda item: (len(item[1].nodes), item[0])):
        for node in pipeline.nodes:
            owner.setdefault(node.name, name)
    result = {}
    for name, pipeline in pipelines.items():
        parts = [
            Pipeline(
                [node for node in pipeline.nodes if owner[node.name] == phase],
                namespace=phase,
                prefix_datasets_with_namespace=False,
            )
            for phase in sorted({owner[node.name] for node in pipeline.nodes})
        ]
        result[name] = sum(parts, Pipeline([]))
    return result


def register_pipelines() -> dict[str, Pipeline]:
    # Every phase is built, whatever `--pipelines` asked for: find_pipelines' selective import
    # turned a mistyped name into an ImportError traceback.
    pipelines = PipelineRegistry(
        namespaced(
            {name: importlib.import_module(f"trading_rl.pipelines.{name}").create_pipeline() for name in phase_names()}
        )
    )
    pipelines["__default__"] = sum(
        (pipeline for name, pipeline in pipelines.items() if name not in NOT_IN_DEFAULT), Pipeline([])
    )
    return pipelines

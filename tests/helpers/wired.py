"""The functions a pipeline wires, by node name: a node called as Kedro calls it (plain ``params:``
mappings in, typed sections inside), without a session."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kedro.pipeline import Pipeline


def wired_functions(*pipelines: Pipeline) -> dict[str, Callable[..., Any]]:
    return {node.name: node.func for pipeline in pipelines for node in pipeline.nodes}

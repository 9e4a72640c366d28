"""Nodes that receive typed parameter sections: the one place a node's ``params:<section>`` input is
turned into its section dataclass.

Kedro hands a node each ``params:<section>`` as the plain mapping of ``conf/`` (and kedro-mlflow logs
that mapping); ``typed_node`` wires a phase function so that it receives the section the run's
parameter check already resolved (``integration.parameter_sections.resolved_section``): no node
parses a section again, and the phase functions take typed sections only.

Why not Kedro 1.7's own typed parameters: Kedro instantiates a dataclass-annotated ``params:`` input
as ``cls(**mapping)``, which leaves nested sections as dicts and skips every range, choice and
unknown-key check, and it replaces the mapping everywhere (kedro-mlflow would log one truncated
string per section). So the wrapper states what it really takes, a mapping, and Kedro leaves the
parameters alone.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kedro.pipeline import Node

from trading_rl.integration.parameter_sections import SECTIONS, resolved_section

PARAMS = "params:"


def typed(func: Callable[..., Any], inputs: Sequence[str]) -> Callable[..., Any]:
    """``func`` taking its positional ``inputs``, each ``params:<section>`` handed over as the typed
    section (``func`` itself where no input is a section)."""
    sections = {
        position: name.removeprefix(PARAMS)
        for position, name in enumerate(inputs)
        if name.startswith(PARAMS) and name.removeprefix(PARAMS) in SECTIONS
    }
    if not sections:
        return func

    @functools.wraps(func)
    def with_typed_sections(*args: Any) -> Any:
        return func(
            *(
                resolved_section(sections[position], value) if position in sections else value
                for position, value in enumerate(args)
            )
        )

    names = list(inspect.signature(func).parameters)
    taken = {names[position] for position in sections if position < len(names)}
    annotations = getattr(func, "__annotations__", {})
    with_typed_sections.__annotations__ = {**annotations, **dict.fromkeys(taken, Mapping[str, Any])}
    return with_typed_sections


def bound(func: Callable[..., Any], **kwargs: Any) -> Callable[..., Any]:
    """``func`` with ``kwargs`` fixed (a run-time collaborator such as ``metrics_callback``), keeping its
    name and docstring for Kedro and kedro-viz."""
    return functools.update_wrapper(functools.partial(func, **kwargs), func)


def typed_node(
    func: Callable[..., Any],
    inputs: str | Sequence[str],
    outputs: str | list[str] | None,
    *,
    name: str,
    tags: str | Sequence[str] = (),
) -> Node:
    """``Node(func, inputs, outputs, name=..., tags=...)`` with ``func`` receiving typed sections."""
    names = [inputs] if isinstance(inputs, str) else list(inputs)
    return Node(
        typed(func, names), inputs=inputs if isinstance(inputs, str) else names, outputs=outputs, name=name, tags=tags
    )

"""Execution back-end (``runtime.engine``: sequential or Ray) and the shared encoder of many-symbol
training."""

from trading_rl.runtime.engine import (
    DEFAULT_RUNTIME_PARAMS,
    Executor,
    RayExecutor,
    SequentialExecutor,
    connect_ray,
    make_executor,
    resolve_runtime_params,
)

__all__ = [
    "DEFAULT_RUNTIME_PARAMS",
    "Executor",
    "RayExecutor",
    "SequentialExecutor",
    "connect_ray",
    "make_executor",
    "resolve_runtime_params",
]

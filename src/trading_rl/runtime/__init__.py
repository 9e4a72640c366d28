"""Execution back-end (``runtime.engine``: sequential or Ray) and the shared encoder of many-symbol
training."""

from trading_rl.runtime.engine import (
    Executor,
    RayExecutor,
    RuntimeParams,
    SequentialExecutor,
    connect_ray,
    make_executor,
)

__all__ = [
    "Executor",
    "RayExecutor",
    "RuntimeParams",
    "SequentialExecutor",
    "connect_ray",
    "make_executor",
]

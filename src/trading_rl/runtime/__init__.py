"""The execution engine (``runtime.engine``): independent tasks run sequentially or as Ray tasks, and
the project's one Ray connection (``connect_ray``)."""

from trading_rl.runtime.engine import (
    DEFAULT_RUNTIME_PARAMS,
    Executor,
    RayExecutor,
    SequentialExecutor,
    connect_ray,
    make_runtime_executor,
    resolve_runtime_params,
)

__all__ = [
    "DEFAULT_RUNTIME_PARAMS",
    "Executor",
    "RayExecutor",
    "SequentialExecutor",
    "connect_ray",
    "make_runtime_executor",
    "resolve_runtime_params",
]

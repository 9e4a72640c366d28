"""The execution engine (``runtime.engine``): independent tasks run sequentially or as Ray tasks, and
the project's one Ray connection (``connect_ray``)."""

from trading_rl.runtime.engine import (
    Executor,
    PopulationParams,
    RayExecutor,
    RuntimeParams,
    SequentialExecutor,
    connect_ray,
    make_runtime_executor,
)

__all__ = [
    "Executor",
    "PopulationParams",
    "RayExecutor",
    "RuntimeParams",
    "SequentialExecutor",
    "connect_ray",
    "make_runtime_executor",
]

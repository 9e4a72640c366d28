"""One local 2-CPU Ray session for every test under tests/runtime (starting Ray costs seconds)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="package")
def ray_session():
    """A local 2-CPU Ray, or the one another test directory already started (reused, left running)."""
    import ray
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False)
    yield
    if started:
        ray.shutdown()

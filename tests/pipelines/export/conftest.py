import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "export"))
from export_setup import build  # noqa: E402  (the shared tiny setup of tests/export)


@pytest.fixture(scope="session")
def export_pipeline_setup():
    return build()

import pytest
from helpers.export_setup import build


@pytest.fixture(scope="session")
def export_pipeline_setup():
    return build()

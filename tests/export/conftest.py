import pytest
from helpers.export_setup import build

from trading_rl.export import export_actor


@pytest.fixture(scope="session")
def export_setup():
    return build()


@pytest.fixture(scope="session")
def onnx_bytes(export_setup):
    return export_actor(export_setup.model)

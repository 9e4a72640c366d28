"""notebooks/validation_report.ipynb executes against a project whose validation outputs exist.

Needs the notebook runtime (``nbclient``, ``nbformat``, ``ipykernel``), which the ``test`` extra installs.
"""

from __future__ import annotations

import shutil

import pytest
import yaml
from kedro.io import DataCatalog
from kedro.runner import SequentialRunner
from validation_fixtures import PROJECT_ROOT, catalog_for, market

from trading_rl.pipelines.validation import create_pipeline

VERSION = "2030-01-01T00.00.00.000Z"


@pytest.mark.slow
def test_validation_report_notebook_runs_on_the_latest_reports(tmp_path, project_copy):
    import nbclient
    import nbformat

    project = project_copy(tmp_path / "project")
    catalog = catalog_for(project, market(900), VERSION)
    SequentialRunner().run(create_pipeline(), catalog)
    # The notebook also reads the prices through the catalog: store them where the project keeps them.
    entry = yaml.safe_load((PROJECT_ROOT / "conf/base/catalog.yml").read_text())["prices"]
    entry["filepath"] = str(project / entry["filepath"])
    DataCatalog.from_config({"prices": entry}, save_version=VERSION).save("prices", catalog.load("prices"))

    (project / "notebooks").mkdir()
    notebook_path = project / "notebooks" / "validation_report.ipynb"
    shutil.copy(PROJECT_ROOT / "notebooks" / "validation_report.ipynb", notebook_path)
    notebook = nbformat.read(notebook_path, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(notebook_path.parent)}}
    )
    client.execute()

    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]
    assert not [output for output in outputs if output.get("output_type") == "error"]
    text = "".join(output.get("text", "") for output in outputs)
    assert f"run: {VERSION}" in text
    assert "first validation run" in text
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert len(images) >= 4  # equity, fold Sharpe, action histogram, regime-shaded prices

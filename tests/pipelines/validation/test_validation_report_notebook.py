"""notebooks/validation_report.ipynb executes against a project whose validation outputs exist.

Needs the notebook runtime (``nbclient``, ``nbformat``, ``ipykernel``), which the ``test`` extra installs.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers.validation_fixtures import PROJECT_ROOT, catalog_for, market
from kedro.io import DataCatalog
from kedro.runner import SequentialRunner

from trading_rl.integration.mlflow_hooks import MlflowConventionHooks
from trading_rl.pipelines.validation import create_pipeline

PRICES_ENTRY = yaml.safe_load((PROJECT_ROOT / "conf/base/catalog.yml").read_text())["prices"]
# README "Your own data", step by step: conf/local only, fractional splits.
LOCAL_PARAMETERS = {
    "parameters_feature_extraction.yml": {
        "feature_extraction": {
            "symbols": [{"name": "GOOGL", "source": "file"}],
            "splits": {"train_end": None, "validation_end": None, "train_fraction": 0.7, "validation_fraction": 0.15},
        }
    },
    "parameters_env_construction.yml": {"env_construction": {"symbol": "GOOGL"}},
}


def _prices_dataset(project, save_version):
    entry = {**PRICES_ENTRY, "filepath": str(project / PRICES_ENTRY["filepath"])}
    return DataCatalog.from_config({"prices": entry}, save_version=save_version).get("prices")


def _execute(project):
    """Run notebooks/validation_report.ipynb in ``project``; returns its code cells' outputs."""
    import nbclient
    import nbformat

    (project / "notebooks").mkdir(exist_ok=True)
    notebook_path = project / "notebooks" / "validation_report.ipynb"
    shutil.copy(PROJECT_ROOT / "notebooks" / "validation_report.ipynb", notebook_path)
    notebook = nbformat.read(notebook_path, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(notebook_path.parent)}}
    )
    # Importing streamlit (the dashboard's tests, in the same worker) sets MPLBACKEND=Agg for the
    # whole process; a kernel started with it would draw no inline figures.
    backend = os.environ.pop("MPLBACKEND", None)
    try:
        client.execute()
    finally:
        if backend is not None:
            os.environ["MPLBACKEND"] = backend
    return [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]


@pytest.mark.slow
def test_notebook_shows_the_validation_run_even_after_a_user_data_run_on_another_symbol(
    tmp_path, project_copy, kedro_run
):
    """A validation run on symbol X, then a user-CSV run (GOOGL) whose prices are the latest version:
    the notebook runs without an error and shows X's report, its figures and X's prices (the
    versions its run recorded). One execution checks both: a notebook kernel costs ~10 s."""
    project = project_copy(tmp_path / "project")
    read_version, run_version = "2020-01-01T00.00.00.000Z", "2020-01-02T00.00.00.000Z"
    _prices_dataset(project, read_version).save(market(900))
    catalog = catalog_for(project, market(900), run_version)
    catalog["prices"] = _prices_dataset(project, run_version)  # versioned input: the run reads read_version
    hooks = MlflowConventionHooks()  # records the input versions into run_metadata (no MLflow run here)
    hooks.after_catalog_created(catalog=catalog, save_version=run_version)
    hooks.before_pipeline_run(
        run_params={"pipeline_names": ["validation"]}, pipeline=create_pipeline(), catalog=catalog
    )
    SequentialRunner().run(create_pipeline(), catalog)

    index = pd.bdate_range("2015-01-02", periods=600, name="date")
    close = 900.0 * np.exp(np.cumsum(np.random.default_rng(5).normal(0.0004, 0.015, len(index))))
    pd.DataFrame(
        {"date": index, "Open": close * 0.999, "High": close * 1.01, "Low": close * 0.99, "Close": close, "Volume": 2e6}
    ).to_csv(project / "data/01_raw/prices/GOOGL.csv", index=False)
    for name, content in LOCAL_PARAMETERS.items():
        (project / "conf/local" / name).write_text(yaml.safe_dump(content))
    kedro_run(project, ["feature_extraction"], env="local")
    assert set(
        DataCatalog.from_config({"prices": {**PRICES_ENTRY, "filepath": str(project / PRICES_ENTRY["filepath"])}}).load(
            "prices"
        )["symbol"]
    ) == {"GOOGL"}  # the latest prices are GOOGL's: loading "latest" would mix

    outputs = _execute(project)
    assert not [output for output in outputs if output.get("output_type") == "error"]
    text = "".join(output.get("text", "") for output in outputs)
    assert f"run: {run_version} | symbol: X | prices version: {read_version} | symbols in prices: X" in text
    assert "GOOGL" not in text
    assert "first validation run" in text
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert len(images) >= 4  # equity, fold Sharpe, action histogram, regime-shaded prices

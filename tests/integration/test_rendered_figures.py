"""RenderedFiguresDataset keeps, per save, the bytes of each file it wrote, in the order the save
wrote them: the MLflow hook pairs them with the figures in that order (mlflow_hooks._log_figures)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from kedro.io.core import Version  # noqa: E402

from trading_rl.integration.datasets import RenderedFiguresDataset  # noqa: E402


def _figure(width: float):
    figure = plt.figure(figsize=(width, 2))
    figure.add_subplot().plot([1, 2, 3])
    return figure


def test_each_save_keeps_the_written_files_in_order_and_forgets_the_last_save(tmp_path):
    dataset = RenderedFiguresDataset(filepath=str(tmp_path / "pages"), save_args={"dpi": 40})
    dataset.save([_figure(2), _figure(4)])
    assert dataset.rendered_png == [(tmp_path / "pages" / f"{i}.png").read_bytes() for i in (0, 1)]
    assert len(dataset.rendered_png[0]) < len(dataset.rendered_png[1])  # the narrow page first

    dataset.save({"b.png": _figure(4), "a.png": _figure(2)})
    assert dataset.rendered_png == [(tmp_path / "pages" / name).read_bytes() for name in ("b.png", "a.png")]


def test_a_versioned_single_figure_keeps_the_file_of_its_version(tmp_path):
    version = "2030-01-01T00.00.00.000Z"
    dataset = RenderedFiguresDataset(filepath=str(tmp_path / "plot.png"), version=Version(None, version))
    dataset.save(_figure(3))
    assert dataset.rendered_png == [(tmp_path / "plot.png" / version / "plot.png").read_bytes()]

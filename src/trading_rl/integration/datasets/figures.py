"""Tearsheet figures drawn once: the PNG bytes a save wrote, kept for the MLflow hook to log.

``mlflow.log_figure`` draws a figure again (and at its own dpi), so logging what
``matplotlib.MatplotlibDataset`` had just saved cost a second rendering of every tearsheet page,
about a third of a second each, and the run's artifact was not the file in ``data/``.
"""

from __future__ import annotations

import io
from typing import Any

from kedro_datasets.matplotlib import MatplotlibDataset


class RenderedFiguresDataset(MatplotlibDataset):
    """``matplotlib.MatplotlibDataset`` that keeps the PNG bytes of its last save, one entry per figure
    in the order the save wrote them (a single figure, a list's order, a dict's order)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._rendered: list[bytes] = []

    @property
    def rendered_png(self) -> list[bytes]:
        """The files the last save wrote, byte for byte."""
        return list(self._rendered)

    def save(self, data: Any) -> None:
        self._rendered = []
        super().save(data)

    def _save_to_fs(self, full_key_path: str, plot: Any) -> None:
        buffer = io.BytesIO()
        plot.savefig(buffer, **self._save_args)
        png = buffer.getvalue()
        with self._fs.open(full_key_path, **self._fs_open_args_save) as file:
            file.write(png)
        self._rendered.append(png)

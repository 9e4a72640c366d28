"""Read-only view of the user's raw price folder (``data/01_raw/prices/<SYMBOL>.csv|.parquet``).

Loading returns ``{symbol: loader}`` with lazy loaders, like ``PartitionedDataset``, so only the
symbols selected in ``parameters_feature_extraction.yml`` are read. Saving is refused: raw files
are never modified by a run.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

SUFFIXES = (".csv", ".parquet")


class RawPriceFilesDataset(AbstractDataset[None, dict[str, Callable[[], Any]]]):
    def __init__(self, path: str, metadata: dict[str, Any] | None = None) -> None:
        self._path = Path(path)
        self.metadata = metadata

    def load(self) -> dict[str, Callable[[], Any]]:
        from trading_rl.data import load_prices

        if not self._path.is_dir():
            return {}
        files: dict[str, Path] = {}
        for file in sorted(self._path.iterdir()):
            if file.suffix.lower() not in SUFFIXES or not file.is_file():
                continue
            symbol = file.stem
            if symbol in files:
                raise DatasetError(
                    f"symbol '{symbol}' has two raw files in {self._path}: "
                    f"{files[symbol].name} and {file.name}; keep one"
                )
            files[symbol] = file
        return {symbol: partial(load_prices, symbol, source="file", path=file) for symbol, file in files.items()}

    def save(self, data: Any) -> None:
        raise DatasetError(f"{self._path} holds raw input files and is never written by a run")

    def _exists(self) -> bool:
        return self._path.is_dir()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}

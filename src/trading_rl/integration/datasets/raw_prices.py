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


def _ambiguous(symbol: str, files: list[Path]) -> Any:
    """The loader of a symbol with two raw files: only a run that reads this symbol stops."""
    raise DatasetError(
        f"symbol '{symbol}' has {len(files)} raw files: {', '.join(str(file) for file in files)}. Fix: keep one "
        "(move the other out of data/01_raw/prices/)"
    )


class RawPriceFilesDataset(AbstractDataset[None, dict[str, Callable[[], Any]]]):
    def __init__(self, path: str, metadata: dict[str, Any] | None = None) -> None:
        self._path = Path(path)
        self.metadata = metadata

    def load(self) -> dict[str, Callable[[], Any]]:
        from trading_rl.data import load_prices

        if not self._path.is_dir():
            return {}
        files: dict[str, list[Path]] = {}
        for file in sorted(self._path.iterdir()):
            if file.suffix.lower() in SUFFIXES and file.is_file():
                files.setdefault(file.stem, []).append(file)
        return {
            symbol: partial(load_prices, symbol, source="file", path=found[0])
            if len(found) == 1
            else partial(_ambiguous, symbol, found)
            for symbol, found in files.items()
        }

    def save(self, data: Any) -> None:
        raise DatasetError(f"{self._path} holds raw input files and is never written by a run")

    def _exists(self) -> bool:
        return self._path.is_dir()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}

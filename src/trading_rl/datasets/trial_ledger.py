"""The trial ledger as a catalog dataset: a folder where every save adds a new immutable file.

``save(rows)`` appends (``evaluation.ledger.append_rows``) and ``load()`` returns every row so far,
so each run's rows are a version of their own and nothing is ever rewritten. With
``read_only: true`` the entry only reads (for a node that must see the ledger before this run
appends to it through the writing entry).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd
from kedro.io import AbstractDataset, DatasetError

from trading_rl.evaluation.ledger import FILE_SUFFIX, append_rows, read_ledger, sweep_stale_staging

logger = logging.getLogger(__name__)


class TrialLedgerDataset(AbstractDataset[pd.DataFrame, pd.DataFrame]):
    def __init__(self, filepath: str, read_only: bool = False, metadata: dict[str, Any] | None = None) -> None:
        self._filepath = Path(filepath)
        self._read_only = read_only
        self.metadata = metadata

    def load(self) -> pd.DataFrame:
        return read_ledger(self._filepath)

    def save(self, data: pd.DataFrame) -> None:
        if self._read_only:
            raise DatasetError(
                f"{self._filepath} is a read-only view of the trial ledger; append through its writing entry"
            )
        for staging in sweep_stale_staging(self._filepath):
            logger.warning("trial ledger: removed %s, the staging file of an append that was killed", staging)
        append_rows(self._filepath, data)

    def _exists(self) -> bool:
        return any(self._filepath.glob(f"*{FILE_SUFFIX}")) if self._filepath.is_dir() else False

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "read_only": self._read_only}

"""The trial ledger as a catalog dataset: a folder where every save adds a new immutable file.

``save(rows)`` appends (``evaluation.ledger.ledger.append_rows``) and ``load()`` returns every row so far,
so each run's rows are a version of their own and nothing is ever rewritten. With
``read_only: true`` the entry only reads (for a node that must see the ledger before this run
appends to it through the writing entry). ``also_read`` folders (the project's committed ledger
under ``docs/results/``) are read with it, never written: what a fresh clone's data/ lacks, the
committed record still counts and still refuses to spend again.

``TestSplitClaimDataset``: saving a final evaluation's identity claims the test split for it
(``evaluation.ledger.final.claim_test_split``: exclusive marker files), loading returns that claim.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd
from kedro.io import AbstractDataset, DatasetError

from trading_rl.evaluation.ledger.final import claim_test_split
from trading_rl.evaluation.ledger.ledger import FILE_SUFFIX, append_rows, read_ledgers, sweep_stale_staging

logger = logging.getLogger(__name__)


class TrialLedgerDataset(AbstractDataset[pd.DataFrame, pd.DataFrame]):
    def __init__(
        self,
        filepath: str,
        read_only: bool = False,
        also_read: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self._filepath = Path(filepath)
        self._read_only = read_only
        self._also_read = [Path(folder) for folder in also_read or []]
        self.metadata = metadata

    def load(self) -> pd.DataFrame:
        return read_ledgers([self._filepath, *self._also_read])

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
        return {
            "filepath": str(self._filepath),
            "read_only": self._read_only,
            "also_read": [str(folder) for folder in self._also_read],
        }


class TestSplitClaimDataset(AbstractDataset[dict, dict]):
    """A folder of test-split claim markers; ``save(identity)`` claims (refusing a spent one),
    ``load()`` returns this run's claim."""

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None) -> None:
        self._filepath = Path(filepath)
        self._claim: dict[str, Any] | None = None
        self.metadata = metadata

    def save(self, data: dict) -> None:
        self._claim = claim_test_split(self._filepath, data)

    def load(self) -> dict:
        if self._claim is None:
            raise DatasetError(
                f"no test-split claim was made in this run ({self._filepath}); the claim is saved by "
                "node check_final_evaluation of this same run"
            )
        return self._claim

    def _exists(self) -> bool:
        return self._claim is not None

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}

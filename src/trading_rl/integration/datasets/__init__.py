"""Catalog datasets for what kedro-datasets lacks: SB3 model zips, torch modules, raw price files,
the append-only trial ledger, figures whose saved bytes the MLflow hook logs."""

from trading_rl.integration.datasets.bytes_dataset import BytesVersionedDataset
from trading_rl.integration.datasets.figures import RenderedFiguresDataset
from trading_rl.integration.datasets.raw_prices import RawPriceFilesDataset
from trading_rl.integration.datasets.sb3_model import SB3ModelDataset
from trading_rl.integration.datasets.trial_ledger import TestSplitClaimDataset, TrialLedgerDataset

__all__ = [
    "BytesVersionedDataset",
    "RawPriceFilesDataset",
    "RenderedFiguresDataset",
    "SB3ModelDataset",
    "TestSplitClaimDataset",
    "TrialLedgerDataset",
]

"""Catalog datasets for what kedro-datasets lacks: SB3 model zips, torch modules, raw price files."""

from trading_rl.datasets.bytes_dataset import BytesVersionedDataset
from trading_rl.datasets.raw_prices import RawPriceFilesDataset
from trading_rl.datasets.sb3_model import SB3ModelDataset

__all__ = ["BytesVersionedDataset", "RawPriceFilesDataset", "SB3ModelDataset"]

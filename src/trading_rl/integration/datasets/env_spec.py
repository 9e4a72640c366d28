"""The env spec as a versioned catalog dataset of plain data (``EnvSpec.to_bytes``), not a pickle:
anyone able to write under ``data/`` must not be able to run code in the next run."""

from __future__ import annotations

from typing import Any

from kedro.io.core import DatasetError, get_filepath_str

from trading_rl.integration.datasets.bytes_dataset import BytesVersionedDataset


class EnvSpecDataset(BytesVersionedDataset):
    """Saves ``EnvSpec.to_bytes()`` (JSON + parquet in a zip); loads it with ``EnvSpec.from_bytes``."""

    def to_bytes(self, data: Any) -> bytes:
        return data.to_bytes()

    def from_bytes(self, raw: bytes) -> Any:
        from trading_rl.envs.spec import EnvSpec

        source = get_filepath_str(self._get_load_path(), self._protocol)
        try:
            return EnvSpec.from_bytes(raw, source=source)
        except ValueError as exc:
            raise DatasetError(str(exc)) from exc

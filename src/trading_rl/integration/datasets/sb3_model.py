"""Stable-Baselines3 model zip as a versioned catalog dataset.

SB3's ``save``/``load`` reject fsspec file objects, so the zip is built in memory. Loading a zip
unpickles code — the one pickle the project still loads — so every saved version gets a sha256
manifest and a file that does not match it is refused before SB3 sees it (``hash_manifest``).
"""

from __future__ import annotations

import importlib
import io
import zipfile
from typing import Any

from kedro.io.core import Version

from trading_rl.integration.datasets.bytes_dataset import BytesVersionedDataset


def import_class(path: str) -> type:
    """The class at the dotted ``path`` named in the catalog."""
    module_name, _, class_name = path.rpartition(".")
    if not module_name:
        raise ValueError(f"model_class must be a dotted path like 'stable_baselines3.SAC', got {path!r}")
    found = getattr(importlib.import_module(module_name), class_name)
    if not isinstance(found, type):
        raise ValueError(f"{path!r} is not a class")
    return found


class SB3ModelDataset(BytesVersionedDataset):
    hash_manifest = True

    def __init__(
        self,
        filepath: str,
        model_class: str = "stable_baselines3.SAC",
        device: str = "auto",
        version: Version | None = None,
        credentials: dict[str, Any] | None = None,
        fs_args: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(filepath, version, credentials, fs_args, metadata)
        self._model_class_path = model_class
        self._device = device

    def to_bytes(self, data: Any) -> bytes:
        buffer = io.BytesIO()
        data.save(buffer)
        return buffer.getvalue()

    def from_bytes(self, raw: bytes) -> Any:
        from stable_baselines3.common.base_class import BaseAlgorithm

        from trading_rl.training.device import resolve_device

        model_class = import_class(self._model_class_path)
        if not issubclass(model_class, BaseAlgorithm):
            raise ValueError(f"model_class {self._model_class_path!r} is not a stable_baselines3 algorithm")
        if not zipfile.is_zipfile(io.BytesIO(raw)):
            raise ValueError(f"not a zip archive (SB3's model format); its first bytes are {raw[:16]!r}")
        return model_class.load(io.BytesIO(raw), device=resolve_device(self._device))

    def _describe(self) -> dict[str, Any]:
        return {**super()._describe(), "model_class": self._model_class_path}

"""Folder datasets for checkpoint migration: the user's legacy zips (read-only) and versioned folders.

Kedro's ``PartitionedDataset`` cannot be versioned and fails on an empty folder; migration needs
both: "no legacy checkpoint" is a normal case (the pipeline trains a baseline), and backups and
migrated models must be new versions that never overwrite an older run's files.
"""

from __future__ import annotations

import io
from pathlib import Path, PurePosixPath
from typing import Any

import torch
from kedro.io import AbstractDataset, DatasetError
from kedro.io.core import Version, get_filepath_str

from trading_rl.integration.datasets.bytes_dataset import (
    FOLDER_MANIFEST,
    BytesVersionedDataset,
    check_manifest,
    sha256_line,
)
from trading_rl.integration.datasets.sb3_model import SB3ModelDataset


class LegacyCheckpointFolderDataset(AbstractDataset[None, dict[str, bytes]]):
    """``{file name: raw bytes}`` of every ``*<suffix>`` file in ``path``; ``{}`` when the folder is
    absent or empty. Bytes only — nothing is unpickled here. Saving is refused: a run never writes
    into the user's legacy folder."""

    def __init__(self, path: str, suffix: str = ".zip", metadata: dict[str, Any] | None = None) -> None:
        self._path = Path(path)
        self._suffix = suffix.lower()
        self.metadata = metadata

    def load(self) -> dict[str, bytes]:
        if not self._path.is_dir():
            return {}
        return {
            file.name: file.read_bytes()
            for file in sorted(self._path.iterdir())
            if file.is_file() and file.name.lower().endswith(self._suffix)
        }

    def save(self, data: Any) -> None:
        raise DatasetError(f"{self._path} holds the user's legacy checkpoints and is never written by a run")

    def _exists(self) -> bool:
        return self._path.is_dir()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path), "suffix": self._suffix}


class BytesFolderDataset(BytesVersionedDataset):
    """A versioned folder ``{file name: item}``; each item goes through ``to_bytes``/``from_bytes``.

    Every item is serialised before anything is written, the files land in a ``.partial`` folder,
    and that folder is renamed into place: a failure leaves no version behind. With
    ``hash_manifest`` the folder also holds ``.sha256sums``, checked for every item on loading.
    """

    def load(self) -> dict[str, Any]:
        load_path = get_filepath_str(self._get_load_path(), self._protocol)
        manifest = f"{load_path}/{FOLDER_MANIFEST}"
        manifest_text = self._read_text(manifest) if self.hash_manifest else None
        items = {}
        for file in sorted(self._fs.ls(load_path, detail=False)):
            name = PurePosixPath(file).name
            if name.startswith("."):
                continue
            with self._fs.open(file, "rb") as handle:
                raw = handle.read()
            if not raw:
                raise DatasetError(f"{file} is empty: the file was truncated or never written")
            if self.hash_manifest:
                check_manifest(raw, name, manifest_text, file, manifest, trust_target=load_path)
            items[name] = self.parse(raw, file)
        return items

    def save(self, data: dict[str, Any]) -> None:
        save_path = get_filepath_str(self._get_save_path(), self._protocol)
        if not isinstance(data, dict):
            raise DatasetError(f"{save_path} takes a dict {{file name: item}}, got {type(data).__name__}")
        payload = {}
        for name, item in data.items():
            if not name or PurePosixPath(name).name != name or name.startswith("."):
                raise DatasetError(f"{save_path}: {name!r} is not a plain file name")
            try:
                payload[name] = self.to_bytes(item)
            except Exception as exc:  # serialiser errors vary by library; nothing has been written
                raise DatasetError(f"{name} could not be serialised for {save_path}: {exc}") from exc
        tmp_path = f"{save_path}.partial"
        self._fs.makedirs(tmp_path, exist_ok=True)
        for name, raw in payload.items():
            with self._fs.open(f"{tmp_path}/{name}", "wb") as handle:
                handle.write(raw)
        if self.hash_manifest:
            with self._fs.open(f"{tmp_path}/{FOLDER_MANIFEST}", "w") as handle:
                handle.write("".join(sha256_line(raw, name) for name, raw in payload.items()))
        self._fs.mv(tmp_path, save_path, recursive=True)
        self._fs.invalidate_cache(get_filepath_str(self._filepath, self._protocol))


class RawBytesFolderDataset(BytesFolderDataset):
    """Files stored and loaded byte for byte (backups keep the source's exact bytes and checksum)."""

    def to_bytes(self, data: bytes) -> bytes:
        if not isinstance(data, bytes):
            raise TypeError(f"expected bytes, got {type(data).__name__}")
        return data

    def from_bytes(self, raw: bytes) -> bytes:
        return raw


class SB3ModelFolderDataset(BytesFolderDataset, SB3ModelDataset):
    """A versioned folder of SB3 model zips, serialised like ``SB3ModelDataset``."""

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
        # Kedro gives every dataset class its own ``__init__``, so the method resolution order
        # would pick the folder base's; the SB3 one (model class, device) is the one wanted.
        SB3ModelDataset.__init__(self, filepath, model_class, device, version, credentials, fs_args, metadata)


class DiscreteCheckpointFolderDataset(BytesFolderDataset):
    """A versioned folder of ``DiscreteCheckpoint``s stored as extracted data: ``<name>.pt`` holds
    plain fields and tensors, read with ``torch.load(weights_only=True)``. A legacy zip that passed
    inspection is thus never kept as a file ``PPO.load`` would unpickle beside the project's models."""

    SUFFIX = ".pt"

    def save(self, data: dict[str, Any]) -> None:
        if not isinstance(data, dict):
            raise DatasetError(f"{self._filepath} takes a dict {{name: DiscreteCheckpoint}}, got {type(data).__name__}")
        super().save({f"{name}{self.SUFFIX}": checkpoint for name, checkpoint in data.items()})

    def load(self) -> dict[str, Any]:
        return {name.removesuffix(self.SUFFIX): checkpoint for name, checkpoint in super().load().items()}

    def to_bytes(self, data: Any) -> bytes:
        buffer = io.BytesIO()
        torch.save(data.to_payload(), buffer)
        return buffer.getvalue()

    def from_bytes(self, raw: bytes) -> Any:
        from trading_rl.migration.checkpoints import DiscreteCheckpoint

        source = str(self._filepath)
        try:
            payload = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises several types for malformed or non-tensor payloads
            raise DatasetError(f"{source}: an extracted checkpoint holds more than plain data ({exc})") from exc
        return DiscreteCheckpoint.from_payload(payload, source)

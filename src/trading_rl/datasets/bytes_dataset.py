"""Versioned dataset base that serialises to memory first and only then writes.

Serialising straight into an fsspec file leaves an empty or truncated version behind when the
serialiser fails — and Kedro would then load that broken file as "latest". Here a failed
serialisation writes nothing, and the bytes land in a temporary file renamed into place.
"""

from __future__ import annotations

from copy import deepcopy
from pathlib import PurePosixPath
from typing import Any

import fsspec
from kedro.io.core import (
    AbstractVersionedDataset,
    DatasetError,
    Version,
    get_filepath_str,
    get_protocol_and_path,
)


class BytesVersionedDataset(AbstractVersionedDataset[Any, Any]):
    """Subclasses implement ``to_bytes(data)`` and ``from_bytes(raw)``."""

    def __init__(
        self,
        filepath: str,
        version: Version | None = None,
        credentials: dict[str, Any] | None = None,
        fs_args: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        protocol, path = get_protocol_and_path(filepath, version)
        fs_args = deepcopy(fs_args) or {}
        if protocol == "file":
            fs_args.setdefault("auto_mkdir", True)
        self._protocol = protocol
        self._fs = fsspec.filesystem(protocol, **(credentials or {}), **fs_args)
        self.metadata = metadata
        super().__init__(
            filepath=PurePosixPath(path),
            version=version,
            exists_function=self._fs.exists,
            glob_function=self._fs.glob,
        )

    def to_bytes(self, data: Any) -> bytes:
        raise TypeError(f"{type(self).__name__} must implement to_bytes")

    def from_bytes(self, raw: bytes) -> Any:
        raise TypeError(f"{type(self).__name__} must implement from_bytes")

    def load(self) -> Any:
        load_path = get_filepath_str(self._get_load_path(), self._protocol)
        with self._fs.open(load_path, "rb") as handle:
            raw = handle.read()
        if not raw:
            raise DatasetError(f"{load_path} is empty: the file was truncated or never written")
        return self.from_bytes(raw)

    def save(self, data: Any) -> None:
        save_path = get_filepath_str(self._get_save_path(), self._protocol)
        try:
            raw = self.to_bytes(data)
        except Exception as exc:  # serialiser errors vary by library; nothing has been written
            raise DatasetError(
                f"{type(data).__name__} could not be serialised for {save_path}: {exc}"
            ) from exc
        tmp_path = f"{save_path}.partial"
        with self._fs.open(tmp_path, "wb") as handle:
            handle.write(raw)
        self._fs.mv(tmp_path, save_path)
        self._fs.invalidate_cache(get_filepath_str(self._filepath, self._protocol))

    def _exists(self) -> bool:
        try:
            load_path = get_filepath_str(self._get_load_path(), self._protocol)
        except DatasetError:
            return False
        return self._fs.exists(load_path)

    def _describe(self) -> dict[str, Any]:
        return {"filepath": self._filepath, "protocol": self._protocol, "version": self._version}

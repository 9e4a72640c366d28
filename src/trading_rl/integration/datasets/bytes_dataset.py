"""Versioned dataset base that serialises to memory first and only then writes.

Serialising straight into an fsspec file leaves an empty or truncated version behind when the
serialiser fails — and Kedro would then load that broken file as "latest". Here a failed
serialisation writes nothing, and the bytes land in a temporary file renamed into place.

Formats whose loading unpickles code (SB3 zips) set ``hash_manifest``: saving writes
``<file>.sha256`` (``sha256sum`` format) next to the version, and loading refuses a file whose bytes
do not match it — a model swapped or edited under ``data/`` is named, never loaded.
``python -m trading_rl.integration.datasets.bytes_dataset PATH`` writes the manifest of a file (or version
folder) you trust.
"""

from __future__ import annotations

import hashlib
import io
import sys
import zipfile
from copy import deepcopy
from pathlib import Path, PurePosixPath
from typing import Any

import fsspec
from kedro.io.core import (
    AbstractVersionedDataset,
    DatasetError,
    Version,
    get_filepath_str,
    get_protocol_and_path,
)

from trading_rl.archives import check_member_sizes

MANIFEST_SUFFIX = ".sha256"
ZIP_MAGIC = b"PK\x03\x04"
FOLDER_MANIFEST = ".sha256sums"  # folder datasets: one manifest per version folder


def sha256_line(raw: bytes, name: str) -> str:
    """One ``sha256sum`` line: ``sha256sum -c`` checks the manifest too."""
    return f"{hashlib.sha256(raw).hexdigest()}  {name}\n"


def check_manifest(
    raw: bytes, name: str, manifest_text: str | None, path: str, manifest: str, trust_target: str | None = None
) -> None:
    """Raise ``DatasetError`` naming ``path`` unless ``manifest_text`` lists ``name`` with ``raw``'s hash.
    ``trust_target`` is what the ``trust`` command takes to write the manifest (default ``path``)."""
    if manifest_text is None:
        raise DatasetError(
            f"{path} has no hash manifest ({manifest}): it was not saved by this project, or before "
            "manifests existed. Loading it would run code stored in the file, so it is not loaded; rerun "
            "the phase that writes it, or, if you trust the file, run "
            f"`python -m trading_rl.integration.datasets.bytes_dataset {trust_target or path}`"
        )
    recorded = {
        line.split(None, 1)[1].strip().lstrip("*"): line.split(None, 1)[0]
        for line in manifest_text.splitlines()
        if len(line.split(None, 1)) == 2
    }
    actual = hashlib.sha256(raw).hexdigest()
    if recorded.get(name) != actual:
        raise DatasetError(
            f"{path} does not match its hash manifest {manifest} (recorded {recorded.get(name)}, file "
            f"{actual}): it changed after it was saved and is not loaded; restore it or rerun the phase "
            "that writes it"
        )


class BytesVersionedDataset(AbstractVersionedDataset[Any, Any]):
    """Subclasses implement ``to_bytes(data)`` and ``from_bytes(raw)``."""

    #: True where ``from_bytes`` unpickles: a sha256 manifest guards every saved version.
    hash_manifest = False

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
        if self.hash_manifest:
            manifest = load_path + MANIFEST_SUFFIX
            text = self._read_text(manifest)
            check_manifest(raw, PurePosixPath(load_path).name, text, load_path, manifest)
        return self.parse(raw, load_path)

    def parse(self, raw: bytes, path: str) -> Any:
        """``from_bytes(raw)`` of the file at ``path``: a zip's declared member sizes are checked first,
        and a parser's error names the file (libraries name a buffer)."""
        if raw[:4] == ZIP_MAGIC:
            with zipfile.ZipFile(io.BytesIO(raw)) as archive:
                check_member_sizes(archive, path)
        try:
            return self.from_bytes(raw)
        except DatasetError:
            raise
        except Exception as exc:  # each format's library raises its own types
            raise DatasetError(
                f"{path} could not be read ({type(exc).__name__}: {exc}). Fix: restore the file, pin another "
                "version with `--load-versions <dataset>:<version>`, or rerun the phase that writes it"
            ) from exc

    def _read_text(self, path: str) -> str | None:
        if not self._fs.exists(path):
            return None
        with self._fs.open(path, "r") as handle:
            return handle.read()

    def _write_atomically(self, path: str, raw: bytes) -> None:
        tmp_path = f"{path}.partial"
        with self._fs.open(tmp_path, "wb") as handle:
            handle.write(raw)
        self._fs.mv(tmp_path, path)

    def save(self, data: Any) -> None:
        save_path = get_filepath_str(self._get_save_path(), self._protocol)
        try:
            raw = self.to_bytes(data)
        except Exception as exc:  # serialiser errors vary by library; nothing has been written
            raise DatasetError(f"{type(data).__name__} could not be serialised for {save_path}: {exc}") from exc
        if self.hash_manifest:
            # The manifest first: a version whose model file exists always has its manifest.
            manifest = sha256_line(raw, PurePosixPath(save_path).name).encode()
            self._write_atomically(save_path + MANIFEST_SUFFIX, manifest)
        self._write_atomically(save_path, raw)
        self._fs.invalidate_cache(get_filepath_str(self._filepath, self._protocol))

    def _exists(self) -> bool:
        try:
            load_path = get_filepath_str(self._get_load_path(), self._protocol)
        except DatasetError:
            return False
        return self._fs.exists(load_path)

    def _describe(self) -> dict[str, Any]:
        return {"filepath": self._filepath, "protocol": self._protocol, "version": self._version}


def trust(paths: list[str]) -> None:
    """Write the hash manifest of each file (``FILE.sha256``) or version folder (``.sha256sums`` over
    its files): for models saved before manifests existed, once you have checked where they came from."""
    for path in map(Path, paths):
        files = (
            sorted(f for f in path.iterdir() if f.is_file() and not f.name.startswith(".")) if path.is_dir() else [path]
        )
        manifest = path / FOLDER_MANIFEST if path.is_dir() else Path(f"{path}{MANIFEST_SUFFIX}")
        manifest.write_text("".join(sha256_line(file.read_bytes(), file.name) for file in files))
        print(f"{manifest}:\n{manifest.read_text()}", end="")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(
            "usage: python -m trading_rl.integration.datasets.bytes_dataset PATH [PATH ...]  "
            "(a file gets FILE.sha256, a version folder .sha256sums)"
        )
    trust(sys.argv[1:])

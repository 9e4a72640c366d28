"""Read-only view of the previous version of a versioned JSON report, or ``None`` on a first run.

The validation pipeline compares its new report with the last one. Loading the report's own
dataset would give whichever version is newest at load time — after this run saved, that is this
run's. This dataset points at the same folder but loads the newest version *older than the current
run's save version* (every versioned dataset of a run shares that version), so the answer does not
depend on node order. ``--load-versions previous_validation_report:<version>`` pins the version to
compare with. Saving is refused: the report is written by its own dataset.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

import fsspec
from kedro.io.core import (
    AbstractVersionedDataset,
    DatasetError,
    Version,
    VersionNotFoundError,
    get_filepath_str,
    get_protocol_and_path,
)


class PreviousVersionJSONDataset(AbstractVersionedDataset[None, Any]):
    def __init__(
        self,
        filepath: str,
        version: Version | None = None,
        credentials: dict[str, Any] | None = None,
        fs_args: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        protocol, path = get_protocol_and_path(filepath, version)
        self._protocol = protocol
        self._fs = fsspec.filesystem(protocol, **(credentials or {}), **(fs_args or {}))
        self.metadata = metadata
        super().__init__(
            filepath=PurePosixPath(path),
            version=version or Version(None, None),
            exists_function=self._fs.exists,
            glob_function=self._fs.glob,
        )

    def previous_version(self) -> str | None:
        """The pinned load version, else the newest existing version before this run's."""
        if self._version.load:
            return self._version.load
        current = self.resolve_save_version()
        try:
            paths = self._get_versions()
        except VersionNotFoundError:
            return None
        versions = [PurePosixPath(path).parent.name for path in paths]
        earlier = [version for version in versions if version < current]
        return max(earlier) if earlier else None

    def load(self) -> Any:
        version = self.previous_version()
        if version is None:
            return None
        load_path = get_filepath_str(self._get_versioned_path(version), self._protocol)
        if not self._fs.exists(load_path):
            raise DatasetError(f"version {version!r} of {self._filepath} does not exist")
        with self._fs.open(load_path, "r") as handle:
            return json.load(handle)

    def save(self, data: Any) -> None:
        raise DatasetError(f"{self._filepath} is read through PreviousVersionJSONDataset and never written by it")

    def _exists(self) -> bool:
        return self.previous_version() is not None

    def _describe(self) -> dict[str, Any]:
        return {"filepath": self._filepath, "protocol": self._protocol, "version": self._version}

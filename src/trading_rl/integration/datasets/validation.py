"""Read-only view of the previous version of a versioned report or table, or ``None`` on a first run.

The validation pipeline compares its new report with the last one. Loading the report's own
dataset would give whichever version is newest at load time — after this run saved, that is this
run's. This dataset points at the same folder but loads the newest version *older than the current
run's save version* (every versioned dataset of a run shares that version), so the answer does not
depend on node order. ``--load-versions previous_validation_report:<version>`` pins the version to
compare with. Saving is refused: the report is written by its own dataset.
``PreviousVersionParquetDataset`` does the same for a parquet table (the forward record). It too
picks its own version, also one a failed run wrote: the record is checked bar for bar against a
replay before it is continued (``phases.forward.extend_record``), and pinning it to completed
runs only would stop every later validation run after one forward run failed past its first save.
"""

from __future__ import annotations

import io
import json
from pathlib import PurePosixPath
from typing import Any

import pandas as pd
from kedro.io.core import DatasetError, VersionNotFoundError

from trading_rl.integration.datasets.bytes_dataset import BytesVersionedDataset


class PreviousVersionDataset(BytesVersionedDataset):
    """Base: subclasses implement ``from_bytes``."""

    def previous_version(self) -> str | None:
        """The pinned load version, else the newest existing version before this run's."""
        if self._version and self._version.load:
            return self._version.load
        current = self.resolve_save_version()
        try:
            paths = self._get_versions()
        except VersionNotFoundError:
            return None
        versions = [PurePosixPath(path).parent.name for path in paths]
        earlier = [version for version in versions if current is None or version < current]
        return max(earlier) if earlier else None

    def resolve_load_version(self) -> str | None:
        return self.previous_version()

    def _get_load_path(self) -> PurePosixPath:
        version = self.previous_version()
        if version is None:
            raise VersionNotFoundError(f"no version of {self._filepath} before this run")
        return self._get_versioned_path(version)

    def load(self) -> Any:
        return super().load() if self.previous_version() is not None else None

    def save(self, data: Any) -> None:
        raise DatasetError(f"{self._filepath} is read through {type(self).__name__} and never written by it")


class PreviousVersionJSONDataset(PreviousVersionDataset):
    # Read by RunManifestHooks: the previous report is wanted even from a run that its gates stopped
    # (enforce_validation_gates fails the run after the report is saved, on purpose).
    picks_own_version = True

    def from_bytes(self, raw: bytes) -> Any:
        return json.loads(raw)


class PreviousVersionParquetDataset(PreviousVersionDataset):
    """The previous forward record; ``attrs["version"]`` and ``attrs["earlier_versions"]`` let the
    record check (``phases.forward.check_record``) name it and the versions to go back to. A file that
    is not parquet loads as an empty frame with ``attrs["unreadable"]``: refused by that check, unless
    the run supersedes the record (``forward.supersede_record``)."""

    picks_own_version = True

    def earlier_versions(self, version: str) -> list[str]:
        try:
            paths = self._get_versions()
        except VersionNotFoundError:
            return []
        return sorted(name for name in (PurePosixPath(path).parent.name for path in paths) if name < version)

    def load(self) -> pd.DataFrame | None:
        version = self.previous_version()
        if version is None:
            return None
        try:
            frame = super().load()
        except Exception as error:  # a truncated or foreign file (pyarrow's errors vary): the check names it
            cause = error.__cause__ or error  # the parser's own error, not the generic fix of ``parse``
            frame = pd.DataFrame()
            frame.attrs["unreadable"] = (
                f"{self._get_load_path()} is not a readable parquet table ({type(cause).__name__}: {cause})"
            )
        frame.attrs.update(version=version, earlier_versions=self.earlier_versions(version))
        return frame

    def from_bytes(self, raw: bytes) -> pd.DataFrame:
        return pd.read_parquet(io.BytesIO(raw))

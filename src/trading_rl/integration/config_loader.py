"""The project's config loader: an env's outputs go under that env's own data root.

A quick ``--env ci`` run used to share ``data/`` with the real runs: its models became the newest
"deployed" versions and its trials entered the base runs' trial ledger (DSR). ``globals.yml`` of
an env names its ``data_root`` (``conf/base``: ``data``, ``conf/ci``: ``data/ci``), and every
catalog path under ``data/`` is moved there, except the raw inputs (``data/01_raw``), which a quick
run reads like a real one. The catalog keeps its plain ``data/...`` paths, so an entry added by
anyone is isolated without knowing about envs.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from kedro.config import OmegaConfigLoader

DEFAULT_DATA_ROOT = "data"
SHARED_INPUTS = "data/01_raw"
PATH_KEYS = ("filepath", "path")


def rebase_path(path: str, data_root: str) -> str:
    """``data/08_reporting/x.json`` → ``<data_root>/08_reporting/x.json``; raw inputs and paths
    outside ``data/`` stay where they are."""
    parts = PurePosixPath(path).parts
    if data_root == DEFAULT_DATA_ROOT or not parts or parts[0] != DEFAULT_DATA_ROOT:
        return path
    if path == SHARED_INPUTS or path.startswith(SHARED_INPUTS + "/"):
        return path
    return str(PurePosixPath(data_root, *parts[1:]))


def rebase_entry(entry: Any, data_root: str) -> Any:
    """A catalog entry with every ``filepath``/``path`` (nested datasets included) rebased."""
    if isinstance(entry, dict):
        return {
            key: rebase_path(value, data_root)
            if key in PATH_KEYS and isinstance(value, str)
            else rebase_entry(value, data_root)
            for key, value in entry.items()
        }
    return entry


class ProjectConfigLoader(OmegaConfigLoader):
    """``OmegaConfigLoader`` whose ``catalog`` lives under the env's ``globals.yml`` ``data_root``."""

    def data_root(self) -> str:
        root = (self["globals"] or {}).get("data_root", DEFAULT_DATA_ROOT)
        if not isinstance(root, str) or not root.strip() or PurePosixPath(root).is_absolute():
            raise ValueError(
                f"globals.yml of env {self.env!r}: data_root must be a relative folder like 'data/ci', got {root!r}"
            )
        return root.rstrip("/")

    def __getitem__(self, key: str) -> dict[str, Any]:
        config = super().__getitem__(key)
        if key != "catalog":
            return config
        root = self.data_root()
        return {name: rebase_entry(entry, root) for name, entry in config.items()}

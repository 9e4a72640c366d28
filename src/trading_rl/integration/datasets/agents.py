"""A versioned folder of trained agents of mixed kinds (the walk-forward's final models)."""

from __future__ import annotations

from typing import Any

from trading_rl.algorithms.saved import agent_bytes, load_agent
from trading_rl.integration.datasets.migration import SB3ModelFolderDataset
from trading_rl.integration.datasets.sb3_model import import_class


class AgentFolderDataset(SB3ModelFolderDataset):
    """``{file name: agent}``: SB3 agents load as ``model_class``, hierarchical agents as themselves
    (``algorithms.saved``); every file is checked against the folder's sha256 manifest before loading."""

    def to_bytes(self, data: Any) -> bytes:
        return agent_bytes(data)

    def from_bytes(self, raw: bytes) -> Any:
        from trading_rl.training.device import resolve_device

        return load_agent(raw, import_class(self._model_class_path), resolve_device(self._device))

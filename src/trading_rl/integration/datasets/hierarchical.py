"""The hierarchical agent (option controller + option-conditioned SB3 SAC) as one versioned zip.

The controller loads with ``torch.load(weights_only=True)``; the SAC inside is an SB3 zip (which
unpickles), so the file carries a sha256 manifest like ``SB3ModelDataset``."""

from __future__ import annotations

from typing import Any

from kedro.io.core import Version

from trading_rl.integration.datasets.bytes_dataset import BytesVersionedDataset


class HierarchicalAgentDataset(BytesVersionedDataset):
    """Saves ``HierarchicalAgent.to_bytes()``; loads it back on ``device`` (``auto`` picks CUDA)."""

    hash_manifest = True

    def __init__(
        self,
        filepath: str,
        device: str = "auto",
        version: Version | None = None,
        credentials: dict[str, Any] | None = None,
        fs_args: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(filepath, version, credentials, fs_args, metadata)
        self._device = device

    def to_bytes(self, data: Any) -> bytes:
        return data.to_bytes()

    def from_bytes(self, raw: bytes) -> Any:
        from trading_rl.algorithms.options_her.hierarchical import HierarchicalAgent
        from trading_rl.training.device import resolve_device

        return HierarchicalAgent.from_bytes(raw, device=resolve_device(self._device))

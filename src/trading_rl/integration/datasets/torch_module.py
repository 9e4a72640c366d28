"""A small torch module (its constructor config + ``state_dict``) as a versioned catalog dataset.

Only plain tensors and containers are stored, so loading uses ``torch.load(weights_only=True)`` and
unpickles no code; the class is named in the catalog and rebuilt with ``from_config``.
"""

from __future__ import annotations

import io
from typing import Any

import torch as th
from kedro.io.core import Version

from trading_rl.integration.datasets.bytes_dataset import BytesVersionedDataset
from trading_rl.integration.datasets.sb3_model import import_class


class TorchModuleDataset(BytesVersionedDataset):
    """Saves ``{"config": module.config, "state_dict": module.state_dict()}``; loads it back into
    ``module_class.from_config(config)`` in eval mode on the CPU."""

    def __init__(
        self,
        filepath: str,
        module_class: str,
        version: Version | None = None,
        credentials: dict[str, Any] | None = None,
        fs_args: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(filepath, version, credentials, fs_args, metadata)
        self._module_class_path = module_class

    def to_bytes(self, data: Any) -> bytes:
        buffer = io.BytesIO()
        state = {key: value.detach().cpu() for key, value in data.state_dict().items()}
        th.save({"config": dict(data.config), "state_dict": state}, buffer)
        return buffer.getvalue()

    def from_bytes(self, raw: bytes) -> Any:
        payload = th.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
        from_config = getattr(import_class(self._module_class_path), "from_config", None)
        if from_config is None:
            raise ValueError(f"module_class {self._module_class_path!r} has no from_config(config) classmethod")
        module = from_config(payload["config"])
        module.load_state_dict(payload["state_dict"])
        return module.eval()

    def _describe(self) -> dict[str, Any]:
        return {**super()._describe(), "module_class": self._module_class_path}

"""An ONNX model as a versioned catalog dataset; it loads and saves the serialised bytes.

Saving checks the bytes with ``onnx.checker`` first, so a corrupt graph never becomes "latest".
"""

from __future__ import annotations

from typing import Any

from trading_rl.integration.datasets.bytes_dataset import BytesVersionedDataset


class OnnxModelDataset(BytesVersionedDataset):
    def to_bytes(self, data: Any) -> bytes:
        import onnx

        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"expected the serialised ONNX model as bytes, got {type(data).__name__}")
        onnx.checker.check_model(onnx.load_model_from_string(bytes(data)))
        return bytes(data)

    def from_bytes(self, raw: bytes) -> bytes:
        return raw

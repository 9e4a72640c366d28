"""Pick the torch device for a training node from config (``device: auto`` uses CUDA when present)."""

from __future__ import annotations

import torch

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(device: str = "auto") -> str:
    """``"auto"`` becomes ``"cuda"`` when torch sees a GPU, else ``"cpu"``; asking for ``"cuda"``
    without one fails here rather than deep inside the first forward pass."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but torch.cuda.is_available() is False")
    return device

"""Numpy copies of small torch MLPs for the env loop.

A shaped env step evaluates two or three tiny networks on one observation; torch's per-call
dispatch costs tens of microseconds there, a numpy matrix product a few. Training stays in torch.
"""

from __future__ import annotations

import numpy as np
from torch import nn

_ACTIVATIONS = {
    nn.ReLU: lambda x: np.maximum(x, 0.0, out=x),
    nn.Tanh: np.tanh,
}


class FrozenMLP:
    """Inference-only snapshot of an ``nn.Sequential`` made of ``Linear``, ``ReLU`` and ``Tanh``, in
    float32 like the torch module it copies."""

    def __init__(self, module: nn.Module) -> None:
        layers = module if isinstance(module, nn.Sequential) else nn.Sequential(module)
        self.steps: list = []
        for layer in layers:
            if isinstance(layer, nn.Linear):
                weight = layer.weight.detach().cpu().float().numpy().T.copy()
                bias = layer.bias.detach().cpu().float().numpy().copy()
                self.steps.append((weight, bias))
            elif type(layer) in _ACTIVATIONS:
                self.steps.append(_ACTIVATIONS[type(layer)])
            elif isinstance(layer, nn.Dropout):
                continue  # identity at inference
            else:
                raise TypeError(f"FrozenMLP cannot copy a {type(layer).__name__} layer")

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = np.asarray(x, dtype=np.float32)
        for step in self.steps:
            if isinstance(step, tuple):
                out = out @ step[0]
                out += step[1]  # in place: one temporary less per layer
            else:
                out = step(out)
        return out

"""Trained agents → ONNX actors with parity and latency reports, and their inference configs."""

from trading_rl.pipelines.export.pipeline import create_pipeline

__all__ = ["create_pipeline"]

"""Validation gates as the ``validation`` section resolves them, from the plain mappings tests write."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trading_rl.evaluation.validation.gates import ValidationGateParams


def gate_sections(gates: Mapping[str, Mapping[str, Any]]) -> dict[str, ValidationGateParams]:
    return {name: ValidationGateParams.from_mapping(gate, f"validation.gates.{name}") for name, gate in gates.items()}

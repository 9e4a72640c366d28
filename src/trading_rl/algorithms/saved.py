"""One saved form for every agent that has one: the hierarchical agent's own zip (``to_bytes``) or
SB3's zip. How a trained agent leaves a worker process (the model object holds loggers and envs that
do not pickle reliably), how a folder of mixed agents is stored, and what MLflow logs.

Loading tells the two apart by the zip's members (the hierarchical zip holds ``settings.json`` and
the SAC's own zip), so a folder of agents needs no class per file; the SB3 class is the caller's.
"""

from __future__ import annotations

import io
import zipfile
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

HIERARCHICAL_MEMBERS = {"settings.json", "low_level_sac.zip"}


def sb3_zip_bytes(model: Any) -> bytes:
    """The SB3 zip of ``model``, built in memory (SB3 rejects fsspec file objects); also how a trained
    agent leaves a worker process (the model holds loggers and envs that do not pickle reliably)."""
    buffer = io.BytesIO()
    model.save(buffer)
    return buffer.getvalue()


def agent_bytes(agent: Any) -> bytes:
    """``agent.to_bytes()`` where the agent has it, else SB3's zip."""
    return agent.to_bytes() if hasattr(agent, "to_bytes") else sb3_zip_bytes(agent)


def load_agent(raw: bytes, sb3_class: type[BaseAlgorithm], device: str = "cpu") -> Any:
    """The agent ``agent_bytes`` saved: the hierarchical agent, or ``sb3_class`` loaded from SB3's zip."""
    with zipfile.ZipFile(io.BytesIO(raw)) as zipped:
        hierarchical = HIERARCHICAL_MEMBERS <= set(zipped.namelist())
    if hierarchical:
        from trading_rl.algorithms.options_her.hierarchical import HierarchicalAgent

        return HierarchicalAgent.from_bytes(raw, device=device)
    return sb3_class.load(io.BytesIO(raw), device=device)

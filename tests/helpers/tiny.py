"""Tiny parameters: the smallest settings under which an agent, a walk-forward or a pipeline still
does what its test checks. A test states only what it needs beyond them:
``tiny_agent(sac={"learning_starts": 50})``, ``{**TINY_WALK_FORWARD, "seeds": 2}``."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

# A SAC+ICM agent section (``sac_icm.agent``): 16-unit nets, short warm-ups, a small buffer.
TINY_AGENT: dict[str, Any] = {
    "sac": {"learning_starts": 30, "batch_size": 16, "buffer_size": 1000},
    "policy": {"net_arch": [16, 16]},
    "icm": {"warmup_steps": 30, "feature_dim": 8, "hidden_dim": 16},
}


def tiny_sac_icm(agent: Mapping[str, Any] | None = None, **phase: Any) -> dict[str, Any]:
    """A whole ``sac_icm`` section around ``agent`` (``TINY_AGENT`` when not given): its phase keys
    have no code default, so a node that reads the section needs them."""
    section = {"device": "cpu", "progress_bar": False, "evaluation_split": "validation", "resume_dir": "resume"}
    return {**section, "agent": copy.deepcopy(dict(TINY_AGENT if agent is None else agent)), **phase}


# A feature_extraction section: the tests' symbol X, fraction splits, features without GARCH (its fit
# dominates a tiny run), robust scaling.
TINY_FEATURES: dict[str, Any] = {
    "symbols": ["X"],
    "splits": {"train_fraction": 0.6, "validation_fraction": 0.2},
    "features": {"garch": None},
    "scaler": {"method": "robust", "clip": 5.0},
}

# A walk-forward protocol: two 60-bar test windows after 200 training bars, retraining every
# second fold, one seed, 60 training steps (20 when fine-tuning).
TINY_WALK_FORWARD: dict[str, Any] = {
    "train_length": 200,
    "test_length": 60,
    "step": 60,
    "max_folds": 2,
    "retrain_frequency": 2,
    "seeds": 1,
    "timesteps": 60,
    "finetune_timesteps": 20,
    "device": "cpu",
    "data_end": "all",
    "agent_overrides": {},
}


def tiny_agent(base: Mapping[str, Any] | None = None, **sections: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` (``TINY_AGENT`` when not given) with each named section's keys replaced by
    ``sections[name]``'s (a section not in ``base`` is added)."""
    agent = copy.deepcopy(dict(TINY_AGENT if base is None else base))
    for name, changes in sections.items():
        agent[name] = {**agent.get(name, {}), **changes}
    return agent

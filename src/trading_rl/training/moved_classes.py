"""Reading SB3 zips saved before the domain was laid out by algorithm (issue 44).

SB3 stores some attributes of a model as cloudpickled objects in the zip's ``data`` JSON, and a
pickle names each class by its module path: a ``SACWithICM`` zip names ``ICMConfig``
(``icm_config``), ``AuxiliaryConfig`` and ``RegimeParams`` (``auxiliary_config``), ``MarketEncoder`` or
``FrozenEncoderExtractor`` (``policy_kwargs``), ``AuxiliaryReplayBuffer`` or ``FastHerReplayBuffer``
(``replay_buffer_class``), ``WidenedSACPolicy`` (``policy_class``). Those classes were in
``trading_rl.agents`` and ``trading_rl.evaluation`` then. ``moved_class_objects`` reads the entries
of a zip that name an old path, with each old module looked up at its new place, for SB3's
``load(custom_objects=...)``; nothing else of the file is read differently.
"""

from __future__ import annotations

import importlib
import io
import json
import pathlib
import pickle
import zipfile
from base64 import b64decode
from typing import Any

from stable_baselines3.common.save_util import open_path

# Old module -> where its classes are now (the first of the new modules that has the name).
MOVED_MODULES: dict[str, tuple[str, ...]] = {
    "trading_rl.agents.auxiliary": ("trading_rl.algorithms.sac_icm.auxiliary", "trading_rl.training.params"),
    "trading_rl.agents.icm": ("trading_rl.algorithms.sac_icm.icm", "trading_rl.training.params"),
    "trading_rl.agents.sac_icm": ("trading_rl.algorithms.sac_icm.sac_icm", "trading_rl.training.params"),
    "trading_rl.agents.shared_encoder": ("trading_rl.algorithms.sac_icm.shared_encoder",),
    "trading_rl.agents.training_env": ("trading_rl.algorithms.sac_icm.training_env",),
    "trading_rl.agents.controller": ("trading_rl.algorithms.options_her.controller",),
    "trading_rl.agents.her": ("trading_rl.algorithms.options_her.her",),
    "trading_rl.agents.hierarchical": ("trading_rl.algorithms.options_her.hierarchical",),
    "trading_rl.agents.option_env": ("trading_rl.algorithms.options_her.option_env",),
    "trading_rl.agents.options": ("trading_rl.algorithms.options_her.options",),
    "trading_rl.agents.widening": ("trading_rl.algorithms.options_her.widening",),
    "trading_rl.envs.goal": ("trading_rl.algorithms.options_her.goal",),
    "trading_rl.agents.curriculum": ("trading_rl.training.curriculum",),
    "trading_rl.agents.training": ("trading_rl.training.loop",),
    "trading_rl.agents.streaming": ("trading_rl.training.streaming",),
    "trading_rl.algorithms.population_sac": (
        "trading_rl.algorithms.population.population_sac",
        "trading_rl.algorithms.population.membership",
        "trading_rl.algorithms.population.stacking",
    ),
    "trading_rl.algorithms.actor_learner": (
        "trading_rl.algorithms.vtrace.actor_learner",
        "trading_rl.algorithms.vtrace.actor_critic",
        "trading_rl.algorithms.vtrace.rollouts",
    ),
    "trading_rl.evaluation.regimes": ("trading_rl.evaluation.validation.regimes",),
    "trading_rl.evaluation.rollout": ("trading_rl.evaluation.metrics.rollout",),
}


class _MovedClassUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        for new in MOVED_MODULES.get(module, ()):
            found = importlib.import_module(new)
            if hasattr(found, name):
                return getattr(found, name)
        return super().find_class(module, name)


def _names_a_moved_module(raw: bytes) -> bool:
    return any(module.encode() in raw for module in MOVED_MODULES)


def moved_class_objects(path: str | pathlib.Path | io.BufferedIOBase) -> dict[str, Any]:
    """The pickled entries of the SB3 zip at ``path`` that name a module in ``MOVED_MODULES``, read
    with the moved classes (``{}`` for a zip saved since, or one SB3 cannot read either: its own
    ``load`` reports that). A file object is left at the position it had."""
    if isinstance(path, (str, pathlib.Path)):
        with open_path(path, "r", verbose=0, suffix="zip") as file:
            return _moved_entries(file)
    position = path.tell()
    try:
        return _moved_entries(path)
    finally:
        path.seek(position)


def _moved_entries(file: io.BufferedIOBase) -> dict[str, Any]:
    try:
        with zipfile.ZipFile(file) as archive:
            data = json.loads(archive.read("data"))
    except (zipfile.BadZipFile, KeyError, ValueError):
        return {}
    found = {}
    for key, item in data.items():
        if isinstance(item, dict) and ":serialized:" in item:
            raw = b64decode(item[":serialized:"].encode())
            if _names_a_moved_module(raw):
                found[key] = _MovedClassUnpickler(io.BytesIO(raw)).load()
    return found

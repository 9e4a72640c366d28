"""The multi_symbol phase: its parameters (the symbols and the shared encoder's settings) and its task,
one symbol's agent trained as the ``sac_icm`` phase trains it, with the shared encoder
(``algorithms.sac_icm.shared_encoder``) as its frozen features extractor when given."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import Any

from stable_baselines3.common.utils import set_random_seed

from trading_rl.algorithms.sac_icm.shared_encoder import SharedEncoder, build_agent_with_encoder
from trading_rl.algorithms.saved import sb3_zip_bytes
from trading_rl.config import Section, setting
from trading_rl.envs import EnvSpec
from trading_rl.training.loop import train_agent
from trading_rl.training.params import SacIcmParams

PARAMS_PREFIX = "multi_symbol"
# A symbol names a Kedro namespace and a folder: no dots, slashes or spaces.
SYMBOL_PATTERN = re.compile(r"^[A-Za-z0-9_]+$")


def _symbols_problem(symbols: list[str]) -> str | None:
    if not symbols or len(set(symbols)) != len(symbols):
        return "a non-empty list of distinct names"
    if not all(SYMBOL_PATTERN.match(symbol) for symbol in symbols):
        return "names of letters, digits and '_' only (a symbol names a Kedro namespace)"
    return None


@dataclass(frozen=True, kw_only=True)
class SharedEncoderParams(Section):
    RENAMED = {"lr": "learning_rate"}

    enabled: bool = True
    latent_dim: int = setting(32, interval="[1, inf)")
    hidden_dim: int = setting(128, interval="[1, inf)")
    steps_per_symbol: int = setting(2000, interval="[1, inf)")
    epochs: int = setting(30, interval="[1, inf)")
    batch_size: int = setting(256, interval="[1, inf)")
    learning_rate: float = setting(1e-3, interval="(0, inf)")


@dataclass(frozen=True, kw_only=True)
class MultiSymbolParams(Section):
    """The ``multi_symbol`` section; ``symbols`` has no code default (conf/base is its one place)."""

    symbols: list[str] = setting(check=_symbols_problem)
    shared_encoder: SharedEncoderParams = setting(SharedEncoderParams())


def train_symbol_agent(
    spec: EnvSpec,
    sac_icm: SacIcmParams,
    seed: int,
    work_dir: str,
    encoder: SharedEncoder | None = None,
) -> dict[str, Any]:
    """A task: one symbol's agent trained as the ``sac_icm`` phase trains it (same parameters, best
    and final models, resume checkpoint in ``work_dir``), with ``encoder`` as its frozen features
    extractor when given. Returns the two models as SB3 zip bytes, the history and the best step."""
    set_random_seed(seed)
    model = build_agent_with_encoder(spec.make_env("train", seed=seed), sac_icm.agent, seed, sac_icm.device, encoder)
    outcome = train_agent(
        model,
        partial(spec.make_env, sac_icm.evaluation_split),
        sac_icm.agent,
        work_dir=work_dir,
        periods_per_year=spec.periods_per_year,
        phase="multi_symbol",
        symbol=spec.symbol,
        run_parameters={
            "seed": seed,
            "evaluation_split": sac_icm.evaluation_split,
            "env_spec": spec.digest(),
            "shared_encoder": encoder is not None,
        },
    )
    return {
        "model": sb3_zip_bytes(outcome.model),
        "best_model": sb3_zip_bytes(outcome.best_model),
        "history": outcome.history,
        "best_timestep": outcome.best_timestep,
    }

"""The multi_symbol phase's task: one symbol's agent trained as the ``sac_icm`` phase trains it, with
the shared encoder (``runtime.symbols``) as its frozen features extractor when given."""

from __future__ import annotations

from functools import partial
from typing import Any

from stable_baselines3.common.utils import set_random_seed

from trading_rl.agents import train_agent
from trading_rl.agents.sac_icm import SacIcmParams
from trading_rl.agents.saved import sb3_zip_bytes
from trading_rl.envs import EnvSpec
from trading_rl.runtime.symbols import SharedEncoder, build_agent_with_encoder


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

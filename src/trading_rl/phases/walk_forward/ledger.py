"""The walk-forward's trial-ledger rows: what one trial (an agent configuration) is, and its row."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from trading_rl.evaluation.ledger.ledger import STREAMS, trial_row
from trading_rl.evaluation.metrics.attribution import env_cost_rate
from trading_rl.evaluation.metrics.metrics import return_moments
from trading_rl.evaluation.validation.folds import stitch_out_of_sample, stitched_attribution
from trading_rl.phases.walk_forward.params import WalkForwardJob, WalkForwardParams
from trading_rl.phases.walk_forward.trainers import agent_section, identity_params
from trading_rl.seeding import SeedRole, trial_seed

# Walk-forward parameters that are not the protocol of one agent configuration: which symbols and
# agents run (every agent trains on the same random streams, ``agent_seed``), the overrides (inside
# the agent's parameters), vtrace and es (those agents' own parameters) and the seed count (a stream).
NOT_CONFIGURATION = ("symbols", "agents", "agent_overrides", "vtrace", "es", "seeds")
# The stream every walk-forward agent trains on. It was the agent's index in ``walk_forward.agents``
# (so [sac_icm] and [sac, sac_icm] trained sac_icm on other seeds); index 0 for all keeps the numbers
# of every first-listed agent and gives the arms of an A/B common random numbers per (fold, seed).
SHARED_AGENT_STREAM = 0


def agent_seed(seed: int, seed_index: int) -> int:
    """The training seed of every agent's chain for seed ``seed_index``, whichever agents run."""
    return trial_seed(seed, SeedRole.WALK_FORWARD_AGENT, SHARED_AGENT_STREAM, seed_index)


def trial_configuration(agent: str, config: WalkForwardParams, job: WalkForwardJob, symbol: str) -> dict[str, Any]:
    """What one ledger trial is (hashed into its ``config_hash``): the agent, its effective
    parameters as they act (``identity_params``), the walk-forward protocol (windows, gap,
    retraining, budgets), the feature and scaler parameters, the env config and the symbol; its
    random streams (base seed, seed count, agent stream) under ``streams``. ``config``: the
    walk-forward parameters with their gap checked (``WalkForwardParams.with_gap``)."""
    protocol = WalkForwardParams.identity_view(config.to_dict())
    section = agent_section(agent, job.with_walk_forward_agents(config), config.agent_overrides)
    return {
        "agent": agent,
        "agent_params": identity_params(agent, section),
        "walk_forward": {key: value for key, value in protocol.items() if key not in NOT_CONFIGURATION},
        "features": {key: getattr(job.feature_extraction, key).identity() for key in ("features", "scaler")},
        "env": job.env.identity(),
        "symbol": symbol,
        STREAMS: {"seed": job.seed, "seeds": config.seeds, "agent_stream": SHARED_AGENT_STREAM},
    }


def trial_rows(
    returns: pd.DataFrame,
    params: WalkForwardParams,
    job: WalkForwardJob,
    run: Mapping[str, Any] | None = None,
    source: str = "walk_forward",
    state: str = "complete",
) -> pd.DataFrame:
    """One trial-ledger row per symbol × agent configuration (baselines are not trials): the
    moments of its fold × seed stitched out-of-sample returns, pooled over seeds, and the median
    over seeds of their return attribution at the env's costs; ``source`` says who evaluated
    (``walk_forward``, ``tuning``), ``state`` whether every seed of ``params`` ran (``pruned``:
    the returns are those of the seeds a pruned tuning trial ran)."""
    config = params.with_gap(job.feature_extraction.features)
    cost_rate = env_cost_rate(job.env)
    agent_steps = returns[returns["kind"] == "agent"]
    stitched = stitch_out_of_sample(agent_steps)
    rows = []
    for (symbol, agent), curve in stitched.groupby(["symbol", "agent"], sort=False):
        steps = agent_steps[(agent_steps["symbol"] == symbol) & (agent_steps["agent"] == agent)]
        ppy = job.periods_per_year[symbol]
        per_seed = pd.DataFrame([item.to_dict() for item in stitched_attribution(curve, ppy, cost_rate)])
        rows.append(
            trial_row(
                source=source,
                symbol=symbol,
                split="walk_forward",
                period_start=pd.Timestamp(curve["timestamp"].min()).isoformat(),
                period_end=pd.Timestamp(curve["timestamp"].max()).isoformat(),
                agent=agent,
                configuration=trial_configuration(agent, config, job, symbol),
                moments=return_moments(curve["return"].to_numpy()),
                n_runs=len(steps[["seed", "fold"]].drop_duplicates()),
                periods_per_year=ppy,
                run=run,
                attribution=per_seed.drop(columns="reason").astype(float).median().to_dict(),
                state=state,
            )
        )
    return pd.DataFrame(rows)

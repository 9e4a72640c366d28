"""Diagnostic agents of the chain benchmark (``chain_controls.py --probes``): where do options_her and
reward_shaper lose their source's capture? Each probe changes one thing against the phase's agent
and is paired with the agent it is built from, on the same market and seed.

options_her (the source SAC+ICM model -> the hierarchical agent):

- ``sac_icm@options_env``: the source model itself on options_her's env (``env_overrides``), untrained:
  what the env change alone does to the source's policy;
- ``options_her:flat``: options and HER off, the same budget: plain SAC fine-tuning on that env
  (base trains options_her 0 steps, so give ``--param options_her.training.total_timesteps=5000``);
- ``options_her:no_her``: options on, HER off.

reward_shaper (the source -> the source continued on the shaped reward):

- ``reward_shaper:unshaped``: the same continuation on the env's own reward at the source's scale
  (``continue_agent``, as ``ab_reward_shaper.py``): the continuation's mechanics alone;
- ``reward_shaper:prior``: the shaped continuation with the objective weights fixed to the phase's
  prior (``weight_network.initial_weights``; no weight network, no potential), at
  ``shaped_reward_scale``: the shaped training without the learned weights;
- ``reward_shaper:pnl_prior``: the same with a prior that is almost all profit: the shaped
  training's mechanics (scale, envs) without the other objectives;
- ``reward_shaper:risk_prior``: the same with profit and a small risk weight (``RISK_PRIOR``): the
  risk control's candidate, a threshold on the predicted volatility.

On a risk family (``vol``, ``regime_vol``) every row also says whether the agent times the risk:
``risk_timing_columns`` (its exposure against the oracle's target exposure, and whether it went flat).

The reward_shaper rows also carry the reward scales the critic sees: the source's scaled P&L reward
and the shaped reward (both per step on the source's own training episodes) and their correlation.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

# The prior that is (almost) all profit: InitialWeights must be positive and sum to 1.
PNL_PRIOR = {"profit": 0.996, "risk": 0.001, "activity": 0.001, "timing": 0.001, "exploration": 0.001}
# Profit with a small risk weight, for the risk control. Without a weight network the objectives
# enter unscaled: per unit of exposure and step, profit earns 100 mu (0.020 at drift 5%) and risk
# costs 100 (v + 0.01) (exposure term and the equity's volatility v per bar), so the profit weight
# beats the risk weight while mu > (risk / profit) (v + 0.01): at 0.011 / 0.985 the threshold falls
# between regime_vol:0.8's calm state (v 0.45%: hold) and its volatile one (v 1.35%: flat).
RISK_PRIOR = {"profit": 0.985, "risk": 0.011, "activity": 0.001, "timing": 0.001, "exploration": 0.002}
FIXED_PRIORS = {"reward_shaper:pnl_prior": PNL_PRIOR, "reward_shaper:risk_prior": RISK_PRIOR}
SCALE_STEPS = 2000  # source steps whose rewards measure the scales
# An agent whose mean |exposure| is under this share of the oracle's went flat (risk families).
FLAT_SHARE = 0.25


@dataclass
class SourceOnEnv:
    """An SB3 model run on the evaluation split with env overrides (``sac_icm@options_env``)."""

    model: object
    env_overrides: dict

    def probe_rollout(self, env_spec, split: str, seed: int) -> pd.DataFrame:
        from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode

        env = env_spec.make_env(split, evaluation=True, **self.env_overrides)
        return run_episode(env, policy_from_sb3(self.model), seed=seed)


def _timed(build) -> tuple[object, float]:
    started = time.perf_counter()
    agent = build()
    return agent, time.perf_counter() - started


def options_probes(source, env_spec, sections: dict, seed: int) -> dict:
    from trading_rl.algorithms.options_her.from_spec import train_from_spec

    options = sections["options_her"]
    found = {"sac_icm@options_env": (SourceOnEnv(source, dict(options.env_overrides)), "sac_icm", 0.0)}
    variants = {
        "options_her:flat": {"options": False, "her": False},
        "options_her:no_her": {"options": True, "her": False},
    }
    for name, switches in variants.items():
        params = dataclasses.replace(
            options,
            options=dataclasses.replace(options.options, enabled=switches["options"]),
            her=dataclasses.replace(options.her, enabled=switches["her"]),
        )
        agent, seconds = _timed(lambda params=params: train_from_spec(env_spec, source, params, seed)[0])
        found[name] = (agent, "sac_icm@options_env", seconds)
    return found


def shaper_probes(source, env_spec, sections: dict, seed: int) -> dict:
    from trading_rl.rewards.shaped_training import continue_agent, make_shaper, training_vec_env
    from trading_rl.rewards.shaper import ShapedRewardVecEnv

    params = sections["reward_shaper"]
    found = {}
    with tempfile.TemporaryDirectory() as work_dir:
        unshaped, seconds = _timed(
            lambda: continue_agent(source, env_spec, training_vec_env(env_spec, params, seed), params, seed, work_dir)
        )
        found["reward_shaper:unshaped"] = (unshaped.model, "sac_icm", seconds)

    def fixed_weights(section):
        """The shaped continuation with ``section``'s prior weights and no potential."""
        venv = training_vec_env(env_spec, section, seed)
        shaper = make_shaper(venv.envs[0], section, source, n_envs=venv.num_envs)
        with tempfile.TemporaryDirectory() as work_dir:
            scale = float(section.training.shaped_reward_scale)
            return continue_agent(
                source, env_spec, ShapedRewardVecEnv(venv, shaper), section, seed, work_dir, reward_scale=scale
            ).model

    sections = {"reward_shaper:prior": params, **{name: with_prior(params, w) for name, w in FIXED_PRIORS.items()}}
    for name, section in sections.items():
        agent, seconds = _timed(lambda section=section: fixed_weights(section))
        found[name] = (agent, "sac_icm", seconds)
    return found


def with_prior(params, weights: dict):
    """The reward_shaper section with these prior objective weights."""
    from trading_rl.rewards.weights import InitialWeights

    network = dataclasses.replace(params.weight_network, initial_weights=InitialWeights(**weights))
    return dataclasses.replace(params, weight_network=network)


def reward_scales(source, env_spec, sections: dict, seed: int, weights=None, potential=None) -> dict:
    """Per-step rewards the critic sees on the source's own stochastic training episodes: the source's
    (P&L x its ``reward_scale``) and the shaper's (x ``shaped_reward_scale``); their std, mean and
    correlation. ``weights``/``potential`` ``None``: the prior shaper of ``sections``."""
    from trading_rl.rewards.shaped_training import make_shaper
    from trading_rl.rewards.shaper import ShapedRewardWrapper

    params = sections["reward_shaper"]
    base_env = env_spec.make_env("train")
    env = ShapedRewardWrapper(base_env, make_shaper(base_env, params, source, weights, potential))
    source.set_random_seed(seed)
    observation, _ = env.reset(seed=seed)
    shaped, pnl = [], []
    for _ in range(SCALE_STEPS):
        action, _ = source.predict(observation, deterministic=False)
        observation, reward, terminated, truncated, info = env.step(action)
        shaped.append(reward)
        pnl.append(info["base_reward"])
        if terminated or truncated:
            observation, _ = env.reset()
    shaped_scaled = np.asarray(shaped) * float(params.training.shaped_reward_scale)
    pnl_scaled = np.asarray(pnl) * float(getattr(source, "reward_scale", 1.0))
    return {
        "source_reward_std": float(pnl_scaled.std()),
        "shaped_reward_std": float(shaped_scaled.std()),
        "shaped_reward_mean": float(shaped_scaled.mean()),
        "shaped_pnl_corr": float(np.corrcoef(shaped_scaled, pnl_scaled)[0, 1]),
    }


PROBED_PHASES = ("options_her", "reward_shaper")


def probe_agents(
    agents: dict, env_spec, sections: dict, seed: int, fitted: dict, phases=PROBED_PHASES
) -> tuple[dict, dict]:
    """The probes of ``phases``, built from the chain's source model; and the extra columns of the
    rows (the reward scales of the phase's shaper and of its fixed priors)."""
    source = agents["sac_icm"][0]
    found: dict = {}
    extras: dict = {}
    if "options_her" in phases:
        found.update(options_probes(source, env_spec, sections, seed))
    if "reward_shaper" in phases:
        found.update(shaper_probes(source, env_spec, sections, seed))
        shaper = sections["reward_shaper"]
        extras = {
            "reward_shaper": reward_scales(
                source, env_spec, sections, seed, fitted.get("weights"), fitted.get("potential")
            ),
            "reward_shaper:prior": reward_scales(source, env_spec, sections, seed),
            **{
                name: reward_scales(source, env_spec, {**sections, "reward_shaper": with_prior(shaper, weights)}, seed)
                for name, weights in FIXED_PRIORS.items()
            },
        }
    return found, extras


def rollout_columns(rollout: pd.DataFrame, hold_threshold: float) -> dict:
    """What a run did: its max drawdown, mean |exposure|, trades per step, whether its actions
    collapsed (the evaluation report's gates, ``monitoring.collapse``) and, for the hierarchical
    agent, its option use."""
    from trading_rl.evaluation.metrics.attribution import rollout_exposure
    from trading_rl.evaluation.metrics.metrics import max_drawdown
    from trading_rl.monitoring.collapse import CollapseThresholds, action_stats, collapse_report

    exposure = np.abs(rollout_exposure(rollout))
    columns = {
        "max_drawdown": max_drawdown(rollout["return"].to_numpy(dtype=np.float64)),
        "mean_abs_exposure": float(exposure.mean()),
        "flat_share": float((exposure < 1e-3).mean()),
    }
    if "trade_units" in rollout:
        columns["trade_rate"] = float((rollout["trade_units"].abs() > 0).mean())
    if "action_raw" in rollout and "action_type" in rollout:
        stats = action_stats(
            rollout["action_raw"].to_numpy(), rollout["action_type"].to_numpy(), hold_threshold=hold_threshold
        )
        columns["collapsed"] = bool(collapse_report(stats, CollapseThresholds())["collapsed"])
    if "option" in rollout:
        share = rollout["option"].value_counts(normalize=True)
        columns.update(
            dominant_option=str(share.index[0]),
            dominant_option_share=float(share.iloc[0]),
            options_used=int(share.size),
        )
    return columns


def option_alignment_columns(rollout: pd.DataFrame, env) -> dict:
    """On a regime family: how much the active option tells about the oracle's filtered regime
    (``evaluation.metrics.alignment``), each decision read at the bar it was taken on."""
    from trading_rl.data.synthetic import REGIME_FAMILIES, oracle_regime_probability
    from trading_rl.evaluation.metrics.alignment import regime_alignment

    model = env.market_model
    if "option" not in rollout or model is None or model.family not in REGIME_FAMILIES:
        return {}
    probability = oracle_regime_probability(env.close_history, model)
    decided_at = env.history_positions[rollout["bar_index"].to_numpy() - 1]
    found = regime_alignment(rollout["option"].to_numpy(), probability[decided_at])
    return {
        "option_regime_mi": found.mutual_information,
        "option_regime_mi_share": found.share,
        "option_regime_mi_null_median": found.null_median,
        "option_regime_mi_null_q95": found.null_q95,
        "option_regime_p": found.p_value,
    }


def risk_timing_columns(rollout: pd.DataFrame, env) -> dict:
    """On a risk family (``vol``, ``regime_vol``): does the agent time the risk? Its exposure after
    each decision against the oracle's target at that bar (``oracle_target_exposure``: the cap
    scaled down as the predicted variance rises), as a Pearson correlation (NaN for an exposure
    that never changes: it times nothing); and its mean |exposure| as a share of the oracle's, with
    ``went_flat`` below ``FLAT_SHARE``: a Sharpe or drawdown won by holding almost nothing shows."""
    from trading_rl.data.synthetic import RISK_FAMILIES, oracle_forecasts, oracle_target_exposure
    from trading_rl.evaluation.metrics.attribution import env_cost_rate, rollout_exposure

    model = env.market_model
    if model is None or model.family not in RISK_FAMILIES:
        return {}
    config = env.config
    mean, variance = oracle_forecasts(env.close_history, model)
    decided_at = env.history_positions[rollout["bar_index"].to_numpy() - 1]
    cap, cost = config.max_position_pct, env_cost_rate(config)
    target = np.array(
        [oracle_target_exposure(mean[t], variance[t], 0.0, model, cap, config.allow_short, cost) for t in decided_at]
    )
    exposure = rollout_exposure(rollout)
    varies = np.ptp(exposure) > 1e-9 and np.ptp(target) > 1e-9  # beyond the cash arithmetic's rounding
    share = float(np.abs(exposure).mean() / np.abs(target).mean())
    return {
        "oracle_exposure_corr": float(np.corrcoef(exposure, target)[0, 1]) if varies else float("nan"),
        "oracle_mean_abs_exposure": float(np.abs(target).mean()),
        "exposure_share_of_oracle": share,
        "went_flat": share < FLAT_SHARE,
    }

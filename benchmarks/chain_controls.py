"""The default chain on the planted-edge controls: every phase's agent scored, paired with its input.

    python benchmarks/chain_controls.py --env base --families fast:0.25 slow:0.3 null:0 \\
        --realisations 1 2 --seeds 0 1 2 3 4 --jobs 2 --out docs/results/chain_controls.csv

For each family x realisation (the synthetic market's seed) x seed, the chain ``kedro run`` trains
(``feature_extraction, env_construction, sac_icm, options_her, reward_shaper, checkpoint_migration``)
is run through the phases' own functions (``trading_rl.phases.*``; no Kedro session) with the
chosen config env's parameters: the market is a ``source: synthetic`` symbol split 0.7 / 0.15 /
0.15 by fraction, and every trained agent is scored on the **evaluation split** (validation) through
its own env (options_her's env overrides, the discrete env for the legacy PPO): its return
attribution against the market line (``evaluation.metrics.attribution``), and ``capture`` = its
information ratio over the long-only oracle's on the chain's env and the same bars (the yardstick
of ``benchmarks/controls.py``, so the paired differences of capture are differences of IR in one
unit). Every agent is paired with its input agent on the same market and seed:
``options_her`` and ``reward_shaper`` with ``sac_icm``, the migrated SAC with the discrete PPO
checkpoint it was migrated from, the fine-tuned copy with the migrated agent.

Why the evaluation split and not the walk-forward windows: ``phases.walk_forward`` chains its own
agents per window (SAC, the options agent, the shaped agent trained from scratch on the prior
weights), not the phases' chain: options_her warm-started from that window's sac_icm, the reward
shaper fitted on its rollouts, the migration. Until the walk-forward runs the phase chain per
window, the chain is scored on its own evaluation split (539 bars of a 4,000-bar market).

``--probes [PHASE ...]`` adds the diagnostic agents of ``chain_probes.py`` (why a later phase loses its
source's capture). ``--budget-scale`` multiplies every step budget (smoke runs).
Writes ``--out`` (CSV, one row per run x agent), ``<out>.md`` (the summary table) and ``<out>.png``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_common import apply_overrides  # noqa: E402
from chain_probes import (  # noqa: E402
    PROBED_PHASES,
    option_alignment_columns,
    probe_agents,
    risk_timing_columns,
    rollout_columns,
)
from chain_summary import (  # noqa: E402
    alignment_table,
    markdown_table,
    paired_metrics,
    paired_metrics_table,
    plot,
    summarise_agents,
)
from controls import ORACLE_FOR_LONG_ONLY, ratio  # noqa: E402
from learning_curve import load_parameters  # noqa: E402

PARTS = ("sac_chain", "migration")
CHAIN_ORDER = ["sac_icm", "options_her", "options_her@0", "reward_shaper", "discrete_ppo", "migrated", "fine_tuned"]
SPLITS = {"train_fraction": 0.7, "validation_fraction": 0.15}
# Every step budget of the chain, for --budget-scale (a smoke run shrinks them all together); not
# options_her.sac.learning_starts: HER samples finished episodes only, so it stays over one episode.
STEP_KEYS = (
    "sac_icm.agent.training.total_timesteps",
    "sac_icm.agent.training.eval_freq",
    "sac_icm.agent.training.resume_every",
    "sac_icm.agent.sac.learning_starts",
    "sac_icm.agent.icm.warmup_steps",
    "options_her.training.total_timesteps",
    "options_her.training.log_freq",
    "options_her.controller.warmup_steps",
    "reward_shaper.rollouts.steps",
    "reward_shaper.training.continue_timesteps",
    "reward_shaper.training.learning_starts",
    "reward_shaper.training.eval_freq",
    "checkpoint_migration.discrete_baseline.total_timesteps",
    "checkpoint_migration.fine_tune.total_timesteps",
    "checkpoint_migration.migration.sac.learning_starts",
)


def market_params(params: dict, market: str, realisation: int, n_bars: int) -> dict:
    """``params`` with one synthetic symbol ``"family:strength"`` (market seed ``realisation``) as the
    extracted and traded symbol, split by fraction."""
    family, _, strength = market.partition(":")
    name = f"{family}_{float(strength or 0):g}_r{realisation}"
    entry = {
        "name": name,
        "source": "synthetic",
        "market": {"family": family, "strength": float(strength or 0), "n_bars": n_bars, "seed": realisation},
    }
    features = {**params["feature_extraction"], "symbols": [entry], "splits": dict(SPLITS)}
    env = {**params["env_construction"], "symbol": name}
    return {**params, "feature_extraction": features, "env_construction": env}


def scaled_budgets(params: dict, scale: float) -> dict:
    """Every ``STEP_KEYS`` budget times ``scale`` (at least 1 where it was positive)."""
    if scale == 1.0:
        return params
    overrides = []
    for key in STEP_KEYS:
        node = params
        for part in key.split("."):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        if isinstance(node, int) and node > 0:
            overrides.append(f"{key}={max(1, round(node * scale))}")
    return apply_overrides(params, overrides)


def chain_sections(params: dict, work_dir: str) -> dict:
    """The typed sections the chain reads, with resume folders inside ``work_dir`` (a run never
    continues another run's checkpoint) and no progress bar."""
    from trading_rl.integration.parameter_sections import resolve_parameters

    params = apply_overrides(
        params,
        [
            f"sac_icm.resume_dir={work_dir}/sac_icm",
            f"reward_shaper.resume_dir={work_dir}/reward_shaper",
            "sac_icm.progress_bar=false",
            "sac_icm.device=cpu",
            "options_her.device=cpu",
            "reward_shaper.device=cpu",
            "checkpoint_migration.device=cpu",
        ],
    )
    names = [
        "feature_extraction",
        "env_construction",
        "sac_icm",
        "options_her",
        "reward_shaper",
        "checkpoint_migration",
    ]
    return resolve_parameters({key: params[key] for key in names}, names)


def build_env_spec(sections: dict):
    """feature_extraction and env_construction through their phase functions: the chain's env spec."""
    from trading_rl.envs import symbol_env_spec
    from trading_rl.phases import feature_extraction as phase

    features = sections["feature_extraction"]
    prices = phase.load_and_validate_prices({}, features)
    splits = phase.define_splits(prices, features)
    feature_params = phase.fit_feature_params(prices, splits, features)
    raw = phase.build_features(prices, feature_params)
    scalers = phase.fit_scalers(raw, prices, splits, features)
    scaled = phase.scale_features(raw, scalers)
    return symbol_env_spec(prices, scaled, splits, sections["env_construction"], scalers, features)


def train_chain(env_spec, sections: dict, seed: int, fitted: dict | None = None, parts=PARTS) -> dict:
    """Every trained agent of the chain's ``parts`` on ``env_spec``: ``{name: (agent, input name,
    seconds)}``; the reward shaper's weight network and potential go to ``fitted`` (for the probes)."""
    agents: dict = {}
    if "sac_chain" in parts:
        agents.update(train_sac_chain(env_spec, sections, seed, fitted))
    if "migration" in parts:
        agents.update(train_migration(env_spec, sections, seed))
    return agents


def _timer(agents: dict):
    def timed(name: str, source: str, build):
        started = time.perf_counter()
        agent = build()
        agents[name] = (agent, source, time.perf_counter() - started)
        return agent

    return timed


def train_sac_chain(env_spec, sections: dict, seed: int, fitted: dict | None) -> dict:
    """sac_icm, and options_her and reward_shaper built on it."""
    from trading_rl.algorithms.options_her.from_spec import train_from_spec
    from trading_rl.phases import options_her, reward_shaper, sac_icm

    agents: dict = {}
    timed = _timer(agents)
    source = timed("sac_icm", "", lambda: sac_icm.train_sac_icm(env_spec, sections["sac_icm"], seed, {})[0])
    timed(
        "options_her",
        "sac_icm",
        lambda: options_her.train_options_her(env_spec, source, sections["options_her"], seed)[0],
    )
    # The warm-started hierarchy untrained (training.total_timesteps 0, base's neutral setting): with
    # --param options_her.training.total_timesteps=5000 the row above is the trained lever beside it.
    timed(
        "options_her@0",
        "sac_icm",
        lambda: train_from_spec(env_spec, source, sections["options_her"], seed, timesteps=0)[0],
    )

    def shaped():
        shaper = sections["reward_shaper"]
        rollouts = reward_shaper.collect_reward_rollouts(source, env_spec, shaper, seed)
        weights, potential, _ = reward_shaper.fit_reward_shaper(rollouts, source, shaper, seed)
        if fitted is not None:
            fitted.update(weights=weights, potential=potential)
        return reward_shaper.train_shaped_agent(source, env_spec, weights, potential, shaper, seed, {})[0]

    timed("reward_shaper", "sac_icm", shaped)
    return agents


def train_migration(env_spec, sections: dict, seed: int) -> dict:
    """The discrete PPO (no legacy checkpoint), the SAC migrated from it and its fine-tuned copy."""
    from trading_rl.phases import checkpoint_migration

    agents: dict = {}
    timed = _timer(agents)
    migration = sections["checkpoint_migration"]
    discrete = timed(
        "discrete_ppo", "", lambda: checkpoint_migration.provide_discrete_checkpoints({}, env_spec, migration, seed)
    )
    migrated = timed(
        "migrated",
        "discrete_ppo",
        lambda: checkpoint_migration.migrate_checkpoints(discrete, env_spec, migration, seed, {})[0],
    )
    if migration.fine_tune.total_timesteps:
        timed(
            "fine_tuned", "migrated", lambda: checkpoint_migration.fine_tune_models(migrated, env_spec, migration, seed)
        )
    return agents


def agent_rollout(name: str, agent, env_spec, sections: dict, seed: int) -> pd.DataFrame:
    """The agent's deterministic run over the evaluation split, through the env it trained on."""
    from trading_rl.algorithms.options_her.hierarchical import HierarchicalAgent
    from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode
    from trading_rl.migration import discrete_policy_from_checkpoint

    split = sections["sac_icm"].evaluation_split
    if hasattr(agent, "probe_rollout"):
        return agent.probe_rollout(env_spec, split, seed)
    if isinstance(agent, HierarchicalAgent):  # aiming at the goal range's middle, as the phase does
        return agent.rollout(env_spec, split, seed)
    if isinstance(agent, dict):  # the migration phase's {checkpoint name: model or checkpoint}
        [(_, agent)] = agent.items()
    if name == "discrete_ppo":
        env = env_spec.make_env(split, kind="discrete", evaluation=True)
        return run_episode(env, policy_from_sb3(discrete_policy_from_checkpoint(agent, env)), seed=seed)
    return run_episode(env_spec.make_env(split, evaluation=True), policy_from_sb3(agent), seed=seed)


def oracle_yardstick(env_spec, split: str, seed: int) -> tuple[dict, object]:
    """The evaluation split's market line, the oracles' and buy-and-hold's attributions, the cost rate."""
    from trading_rl.evaluation.metrics.attribution import env_cost_rate, rollout_attribution
    from trading_rl.evaluation.metrics.baselines import ORACLE_SHORT, market_returns, run_baselines

    make_env = partial(env_spec.make_env, split, evaluation=True)
    env = make_env()
    market = market_returns(env, seed)
    cost_rate = env_cost_rate(env.config)
    baselines = run_baselines(make_env, seed)

    def attribution(rollout):
        return rollout_attribution(rollout, market, periods_per_year=env_spec.periods_per_year, cost_rate=cost_rate)

    found = {name: attribution(baselines[name]) for name in (ORACLE_FOR_LONG_ONLY, ORACLE_SHORT, "buy_and_hold")}
    return found, attribution


def score(rollout: pd.DataFrame, attribute, yardstick: dict, edge: bool) -> dict:
    """One agent's attribution on the evaluation split next to the oracle's: capture and the gate."""
    from trading_rl.evaluation.metrics.attribution import rollout_exposure

    found = attribute(rollout)
    oracle = yardstick[ORACLE_FOR_LONG_ONLY]
    # A run that never holds a position has no residual, so no IR: it took none of the edge (0).
    never_exposed = not np.any(rollout_exposure(rollout) != 0.0)
    information_ratio = 0.0 if never_exposed and not np.isfinite(found.information_ratio) else found.information_ratio
    return {
        "n_steps": found.n,
        "never_exposed": never_exposed,
        "agent_sharpe": 0.0 if never_exposed and not np.isfinite(found.sharpe) else found.sharpe,
        "agent_ir": information_ratio,
        "agent_alpha": found.alpha_annual,
        "alpha_ci90_low": found.alpha_ci90_low,
        "alpha_ci90_high": found.alpha_ci90_high,
        "agent_alpha_t": found.alpha_t,
        "agent_mean_exposure": found.mean_exposure,
        "skill": bool(found.alpha_ci90_low > 0),
        "capture": ratio(information_ratio, oracle.information_ratio, edge),
        "capture_alpha": ratio(found.alpha_annual, oracle.alpha_annual, edge),
        "oracle_sharpe": oracle.sharpe,
        "oracle_ir": oracle.information_ratio,
        "oracle_short_ir": yardstick["oracle_short"].information_ratio,
        "buy_and_hold_capture": ratio(yardstick["buy_and_hold"].information_ratio, oracle.information_ratio, edge),
    }


def run_one(env_spec, sections: dict, market: str, realisation: int, seed: int, probes=(), parts=PARTS) -> list[dict]:
    """The chain on one market and seed, every agent scored; one row per agent."""
    import torch

    torch.set_num_threads(1)
    family = market.partition(":")[0]
    split = sections["sac_icm"].evaluation_split
    yardstick, attribute = oracle_yardstick(env_spec, split, seed)
    started = time.perf_counter()
    fitted: dict = {}
    agents = train_chain(env_spec, sections, seed, fitted, parts)
    extras: dict[str, dict] = {}
    if probes:
        probe_found, extras = probe_agents(agents, env_spec, sections, seed, fitted, probes)
        agents.update(probe_found)
    rows = []
    market_env = env_spec.make_env(split, evaluation=True)  # the market's closes, the oracle's regime and risk
    for name, (agent, source, seconds) in agents.items():
        rollout = agent_rollout(name, agent, env_spec, sections, seed)
        rows.append(
            {
                "family": family,
                "market": market,
                "realisation": realisation,
                "seed": seed,
                "agent": name,
                "input": source,
                "train_seconds": round(seconds, 1),
                **score(rollout, attribute, yardstick, family != "null"),
                **rollout_columns(rollout, market_env.config.hold_threshold),
                **option_alignment_columns(rollout, market_env),
                **risk_timing_columns(rollout, market_env),
                **extras.get(name, {}),
            }
        )
    print(f"{market} r{realisation} seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
    return rows


def add_market_arguments(parser: argparse.ArgumentParser, families=("fast:0.25", "slow:0.3", "null:0")) -> None:
    """The planted markets and seeds a controls benchmark runs on (chain, learner, HER)."""
    parser.add_argument("--env", default="base", help="conf/<env> merged over conf/base (default base)")
    parser.add_argument("--families", nargs="+", default=list(families), help="family:strength")
    parser.add_argument("--realisations", type=int, nargs="+", default=[1, 2], help="market seeds")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--n-bars", type=int, default=4000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_market_arguments(parser)
    parser.add_argument("--budget-scale", type=float, default=1.0, help="multiply every step budget (smoke runs)")
    parser.add_argument(
        "--param", action="append", default=[], metavar="DOTTED.KEY=VALUE", help="override one parameter"
    )
    parser.add_argument(
        "--probes",
        nargs="*",
        choices=PROBED_PHASES,
        help="also train and score the diagnostic agents of these phases (no name: both)",
    )
    parser.add_argument(
        "--parts", nargs="+", choices=PARTS, default=list(PARTS), help="which chains to train (both by default)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="parallel processes (1 torch thread each)")
    parser.add_argument("--out", default="docs/results/chain_controls.csv")
    parser.add_argument("--from-csv", nargs="+", help="summarise these CSVs again, together (no training)")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.from_csv:
        table = pd.concat([read_rows(path) for path in args.from_csv], ignore_index=True)
    else:
        table = train_and_score(args)
        table.to_csv(out, index=False)
    order = [name for name in CHAIN_ORDER if name in set(table["agent"])]
    order += [name for name in dict.fromkeys(table["agent"]) if name not in order]
    summary = summarise_agents(table, order)
    text = markdown_table(summary) + "\n" + paired_metrics_table(paired_metrics(table))
    alignment = alignment_table(table)
    text += "\n" + alignment if alignment else ""
    print(text)
    out.with_suffix(".md").write_text(f"`{shlex.join(sys.argv)}`\n\n{text}")
    plot(table, out.with_suffix(".png"), order)


def read_rows(path: str) -> pd.DataFrame:
    """Rows as ``to_csv`` wrote them: only empty cells are missing (the ``null`` family stays a name)."""
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def train_and_score(args: argparse.Namespace) -> pd.DataFrame:
    """Every family x realisation x seed run, ``args.jobs`` processes at a time; finished runs' rows
    go to ``<out>.partial.csv`` at once, so a run cut short keeps them."""
    base = scaled_budgets(apply_overrides(load_parameters(args.env), args.param), args.budget_scale)
    work = tempfile.mkdtemp(prefix="chain_controls_")
    probes = () if args.probes is None else tuple(args.probes or PROBED_PHASES)
    jobs = []
    for market in args.families:
        for realisation in args.realisations:
            sections = chain_sections(
                market_params(base, market, realisation, args.n_bars), f"{work}/{market}_{realisation}"
            )
            spec = build_env_spec(sections)
            jobs += [(spec, sections, market, realisation, seed, probes, args.parts) for seed in args.seeds]
    partial_path = Path(f"{args.out}.partial.csv")
    partial_path.unlink(missing_ok=True)
    started, rows = time.perf_counter(), []
    try:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for future in as_completed([pool.submit(run_one, *job) for job in jobs]):
                found = future.result()
                rows += found
                pd.DataFrame(found).to_csv(partial_path, mode="a", header=not partial_path.exists(), index=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the runs' resume checkpoints
    print(
        f"{len(jobs)} chain(s) in {time.perf_counter() - started:.0f} s with {args.jobs} process(es) "
        f"on {os.cpu_count()} core(s)",
        flush=True,
    )
    return pd.DataFrame(rows).sort_values(["family", "realisation", "seed"], kind="stable")


if __name__ == "__main__":
    main()

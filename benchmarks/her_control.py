"""HER's own control (issue 43): the goal-conditioned agent with and without relabelling, at equal steps.

    python benchmarks/her_control.py --families fast:0.25 --realisations 1 2 --seeds 0 1 2 3 4 \\
        --steps 5000 --jobs 2 --out docs/results/her_control/her_fast.csv

The seeds' claims: *HER increases success rate by > 30%* and *goal achievement improves
monotonically* (the achieved return rises with the commanded one). Per family x realisation the
base ``sac_icm`` trains once (seed 0: it is the input, not the lever). On it, per seed, the
``options_her`` phase trains ``--steps`` env steps with options off and the goal view on, twice:
``relabel`` (HER as configured, ``n_sampled_goal`` 4: 80% of each batch relabelled) and
``no_relabel`` (``n_sampled_goal`` 0: the same goals in the observation, the same reward, nothing
relabelled). Both arms are scored by the phase's own goal evaluation (``evaluate_from_spec``:
``evaluation.goal_episodes`` episodes on the validation split with targets drawn from the goal
range, each also run with a shuffled target as the goal-agnostic control): success rate (final
return within ``tolerance`` of the target), its difference from the shuffled-target control,
Spearman's rank correlation of target and achieved return, and the success rate per third of the
goal range. Paired over runs (same market, source and seed): relabel - no_relabel. Two scripted
references play the same episodes and targets (``scripted_success``): ``steer`` (the cap until the
return is within half the tolerance below the target, then flat) shows how many goals are reachable
at all, ``flat`` (never trades) what doing nothing scores.

The goal *task* (``--param options_her.her.pnl_weight=0 --param options_her.her.goal_weight=1``:
the reward is the goal reward alone, HER's own setting) on shorter episodes
(``--param options_her.env_overrides.episode_length=100``) gives the learner more episodes per step
budget; the goal range and tolerance are ``options_her.her.goal_high`` and ``.tolerance``.
``goal_sensitivity`` says whether a policy reads its goal at all (``goal_sensitivity``).
Writes ``--out`` (one row per run x arm) and ``<out>.md`` (the summary).
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_common import apply_overrides  # noqa: E402
from chain_controls import (  # noqa: E402
    add_market_arguments,
    build_env_spec,
    chain_sections,
    market_params,
    scaled_budgets,
)
from controls import ORACLE_FOR_LONG_ONLY  # noqa: E402
from learning_curve import load_parameters  # noqa: E402

ARMS = {"relabel": None, "no_relabel": 0}  # n_sampled_goal: None keeps the configured value
SOURCES: dict = {}  # (market, realisation) -> (env_spec, sections, source model); inherited by forked workers


def train_source(market: str, realisation: int, params: dict, n_bars: int, work: str) -> None:
    import torch

    from trading_rl.phases import sac_icm

    # one torch thread, as the arms: two threads on a loaded 2-core machine spun without progress
    # (a 10,000-step source ran 33 min at load 13 without reaching its first checkpoint)
    torch.set_num_threads(1)
    sections = chain_sections(market_params(params, market, realisation, n_bars), f"{work}/{market}_{realisation}")
    env_spec = build_env_spec(sections)
    started = time.perf_counter()
    source = sac_icm.train_sac_icm(env_spec, sections["sac_icm"], 0, {})[0]
    print(f"{market} r{realisation}: source in {time.perf_counter() - started:.0f} s", flush=True)
    SOURCES[(market, realisation)] = (env_spec, sections, source)


def run_arm(market: str, realisation: int, seed: int, arm: str, steps: int) -> dict:
    """One HER arm on one source and seed, scored by the phase's goal evaluation."""
    import torch

    from trading_rl.algorithms.options_her.from_spec import evaluate_from_spec, train_from_spec

    torch.set_num_threads(1)
    env_spec, sections, source = SOURCES[(market, realisation)]
    params = sections["options_her"]
    her = params.her
    if ARMS[arm] is not None:
        her = dataclasses.replace(her, n_sampled_goal=ARMS[arm])
    params = dataclasses.replace(
        params, options=dataclasses.replace(params.options, enabled=False), her=dataclasses.replace(her, enabled=True)
    )
    started = time.perf_counter()
    agent = train_from_spec(env_spec, source, params, seed, timesteps=steps)[0]
    seconds = time.perf_counter() - started
    found = evaluate_from_spec(agent, env_spec, params, seed)
    scripted = scripted_success(env_spec, params, seed)
    sensitivity = goal_sensitivity(agent, env_spec, params, seed)
    goals = found["goals"]
    by_level = goals["achievement_rate_by_level"]
    return {
        "family": market.partition(":")[0],
        "market": market,
        "realisation": realisation,
        "seed": seed,
        "arm": arm,
        "n_sampled_goal": her.n_sampled_goal,
        "steps": steps,
        "train_seconds": round(seconds, 1),
        "episodes": goals["episodes"],
        "success": goals["goal_achievement_rate"],
        "control_success": goals["control"]["goal_achievement_rate"],
        "success_vs_control": goals["achievement_difference"],
        "rank_correlation": goals["goal_rank_correlation"],
        "control_rank_correlation": goals["control_responsiveness"]["goal_rank_correlation"],
        "success_low_third": by_level[0],
        "success_middle_third": by_level[1],
        "success_high_third": by_level[2],
        "mean_abs_goal_miss": goals["mean_abs_goal_miss"],
        "goal_sensitivity": sensitivity,
        "steer_success": scripted["steer"],
        "flat_success": scripted["flat"],
        "sharpe": found["metrics"].get("sharpe"),
        # capture (the chain study's unit) = information_ratio / oracle_information_ratio on the split
        "information_ratio": found["metrics"].get("information_ratio"),
        "oracle_information_ratio": found["baselines"].get(ORACLE_FOR_LONG_ONLY, {}).get("information_ratio"),
    }


def _goal_episodes(env_spec, params, seed: int, policy, episodes: int | None = None) -> np.ndarray:
    """Final return of ``policy`` (``run_episode``'s) on the goal evaluation's own episodes (same
    starts, same targets; the first ``episodes`` of them)."""
    from trading_rl.algorithms.options_her.from_spec import goal_episode_targets
    from trading_rl.algorithms.options_her.her import goal_view
    from trading_rl.evaluation.metrics.rollout import run_episode
    from trading_rl.seeding import SeedRole, trial_seed

    targets, _ = goal_episode_targets(params, seed)
    finals = []
    for episode, target in enumerate(targets[:episodes]):
        env = goal_view(
            env_spec.make_env(params.evaluation.split, evaluation=False, **params.env_overrides), params.her
        )
        rollout = run_episode(
            env, policy, seed=trial_seed(seed, SeedRole.GOAL_EPISODES, episode), options={"desired_goal": float(target)}
        )
        finals.append(float(rollout["achieved_goal"].iloc[-1]))
    return np.array(finals)


def scripted_success(env_spec, params, seed: int) -> dict[str, float]:
    """Success rates of the scripted references on the goal evaluation's own episodes:
    ``steer`` holds the cap until its return is within half the tolerance below the target, then
    holds nothing (it reads only its own return and the target, so it is causal); ``flat`` never
    trades."""
    from trading_rl.algorithms.options_her.from_spec import goal_episode_targets
    from trading_rl.algorithms.options_her.her import goal_achievement
    from trading_rl.envs.continuous import trading_env

    her = params.her
    targets, _ = goal_episode_targets(params, seed)
    probe = env_spec.make_env(params.evaluation.split, evaluation=False, **params.env_overrides)
    flat = np.array([trading_env(probe, "the scripted references").flat_signal], dtype=np.float32)
    cap = np.ones(1, dtype=np.float32)

    def steer(observation) -> np.ndarray:
        achieved, desired = (float(observation[key][0]) * her.goal_unit for key in ("achieved_goal", "desired_goal"))
        return cap if achieved < desired - her.tolerance / 2 else flat

    return {
        name: goal_achievement(_goal_episodes(env_spec, params, seed, policy), targets, her.tolerance)[
            "goal_achievement_rate"
        ]
        for name, policy in (("steer", steer), ("flat", lambda observation: flat))
    }


SENSITIVITY_EPISODES = 5


def goal_sensitivity(agent, env_spec, params, seed: int) -> float:
    """How much the commanded goal moves the policy: the mean |action(goal_high) - action(goal_low)|
    (action units, 2 = the whole range) over the states of the agent's first ``SENSITIVITY_EPISODES``
    goal episodes. A steering policy moves by up to 2 where the return lies between the two goals; 0
    is a policy that ignores its goal, whatever its success rate."""
    her = params.her
    states: list[dict] = []

    def play(observation) -> np.ndarray:
        states.append(observation)
        return agent.low_level.predict(observation, deterministic=True)[0]

    _goal_episodes(env_spec, params, seed, play, SENSITIVITY_EPISODES)
    batch = {key: np.stack([state[key] for state in states]) for key in states[0]}

    def actions_at(goal: float) -> np.ndarray:
        commanded = {**batch, "desired_goal": np.full_like(batch["desired_goal"], goal / her.goal_unit)}
        return agent.low_level.predict(commanded, deterministic=True)[0]

    return float(np.mean(np.abs(actions_at(her.goal_high) - actions_at(her.goal_low))))


def summarise(rows: pd.DataFrame) -> str:
    """Per arm: medians with 90% CIs; paired relabel - no_relabel over runs (same market, source, seed)."""
    from trading_rl.evaluation.metrics.bootstrap import bootstrap_ci, difference_ci

    def cell(values) -> str:
        median, low, high = bootstrap_ci(np.asarray(values, dtype=float))
        return f"{median:.2f} [{low:.2f}, {high:.2f}]"

    lines = [
        "| family | arm | runs | success | vs shuffled-target control | rank corr. target ~ achieved "
        "| success by third of the goal range (low / mid / high) | scripted: steer / flat | goal sensitivity |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    paired = []
    for family, group in rows.groupby("family"):
        for arm in ARMS:
            mine = group[group["arm"] == arm]
            thirds = " / ".join(
                f"{mine[c].mean():.2f}" for c in ("success_low_third", "success_middle_third", "success_high_third")
            )
            lines.append(
                f"| {family} | {arm} | {len(mine)} | {cell(mine['success'])} | {cell(mine['success_vs_control'])} "
                f"| {cell(mine['rank_correlation'])} | {thirds} "
                f"| {mine['steer_success'].mean():.2f} / {mine['flat_success'].mean():.2f} "
                f"| {cell(mine['goal_sensitivity']) if 'goal_sensitivity' in mine else 'n/a'} |"
            )
        wide = group.pivot_table(index=["market", "realisation", "seed"], columns="arm", values="success")
        wide = wide.dropna()
        delta, low, high = difference_ci(wide["relabel"], wide["no_relabel"])
        base = float(wide["no_relabel"].mean())
        gain = f"{(wide['relabel'].mean() / base - 1) * 100:+.0f}%" if base > 0 else "n/a (no_relabel 0)"
        sharpe = group.pivot_table(index=["market", "realisation", "seed"], columns="arm", values="sharpe").dropna()
        sharpe_delta, sharpe_low, sharpe_high = difference_ci(sharpe["relabel"], sharpe["no_relabel"])
        paired.append(
            f"| {family} | {len(wide)} | {delta:+.2f} [{low:+.2f}, {high:+.2f}] | {gain} "
            f"| {sharpe_delta:+.2f} [{sharpe_low:+.2f}, {sharpe_high:+.2f}] |"
        )
    lines += [
        "",
        "| family | paired runs | success, relabel - no_relabel [90% CI] | relative gain of the mean "
        "| Sharpe, relabel - no_relabel [90% CI] |",
        "|---|---|---|---|---|",
        *paired,
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_market_arguments(parser, families=("fast:0.25",))
    parser.add_argument("--steps", type=int, default=5000, help="options_her env steps per arm")
    parser.add_argument("--budget-scale", type=float, default=1.0, help="multiply the source's budget (smoke runs)")
    parser.add_argument("--param", action="append", default=[], metavar="DOTTED.KEY=VALUE")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", default="her_control.csv")
    args = parser.parse_args()
    params = scaled_budgets(apply_overrides(load_parameters(args.env), args.param), args.budget_scale)
    work = tempfile.mkdtemp(prefix="her_control_")
    started = time.perf_counter()
    for market in args.families:
        for realisation in args.realisations:
            train_source(market, realisation, params, args.n_bars, work)
    jobs = [
        (m, r, s, arm, args.steps) for m in args.families for r in args.realisations for s in args.seeds for arm in ARMS
    ]
    rows = []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # fork: the workers inherit SOURCES (env specs and trained models) instead of pickling them
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        for future in as_completed([pool.submit(run_arm, *job) for job in jobs]):
            rows.append(future.result())
            print(
                f"{rows[-1]['market']} r{rows[-1]['realisation']} seed {rows[-1]['seed']} {rows[-1]['arm']}: "
                f"success {rows[-1]['success']:.2f}",
                flush=True,
            )
            pd.DataFrame(rows).to_csv(out, index=False)  # a study cut short keeps its finished runs
    frame = pd.DataFrame(rows).sort_values(["family", "realisation", "seed", "arm"])
    frame.to_csv(out, index=False)
    table = summarise(frame)
    out.with_suffix(".md").write_text(
        f"`python benchmarks/her_control.py {' '.join(sys.argv[1:])}` on {os.cpu_count()} core(s), "
        f"{time.perf_counter() - started:.0f} s\n\n{table}"
    )
    print(table)


if __name__ == "__main__":
    main()

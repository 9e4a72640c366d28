"""The base learner alone on the planted-edge controls, with its learning curve and time to skill.

    python benchmarks/learner_controls.py --families fast:0.25 --realisations 1 2 --seeds 0 1 2 3 4 \\
        --variant base --variant "gamma0.5 sac_icm.agent.sac.gamma=0.5" --jobs 2 \\
        --out docs/results/learner_controls.csv

``chain_controls.py --parts sac_chain`` trains options_her and reward_shaper too (neutral at base,
so they only copy ``sac_icm``); this trains ``sac_icm`` only, through the same market, splits, env
spec and scoring (``chain_controls.score``: capture = IR against the market line over the long-only
oracle's, on the evaluation split), and also scores the policy every ``--curve-every`` steps: the
learning curve, and the **training** wall seconds (scoring excluded) at which capture first reaches
``--skill-capture`` (issue 46's "faster to skill"). Each scored policy's actions also go through
the phase's collapse gates (``collapse_columns``: entropy, dominance, trade rate, ``collapsed``),
so a variant's collapse rate is paired with the first's (issue 43's curiosity control). The agent
is built by ``build_agent`` and trained by SB3's ``learn`` for the phase's budget, as
``train_agent`` does but without its resume slot, collapse monitor and periodic evaluations: the
same learner, not bit for bit the phase's run (the chain study's realisation 1 seeds 1 and 2 ended
at 1.37 and 0.00 there, 1.18 and 0.00 here).
``learner=crossq`` in a variant trains sb3-contrib's CrossQ instead (``parse_variant``).

Sample efficiency (issue 43): the report's budget table gives each variant's capture at 25%, 50%
and 100% of the budget, paired with the first variant's at the same step (``--curve-every`` must
divide those steps). Each checkpoint also records what a switched-on mechanism did since the one
before (``MechanismProbe``): the auxiliary heads' share of the shared encoder's movement and their
losses, the curriculum's stage, so an arm that names a mechanism shows it ran.

A variant is ``"name dotted.key=value ..."`` over ``--env``'s parameters; every variant runs on the
same markets and seeds and is paired with the first (``--variant`` order). Writes ``--out`` (one row
per run x checkpoint), ``<out>.md`` (final-checkpoint table, paired with the first variant, and the
time to skill) and ``<out>.partial.csv`` while running.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from sb3_contrib import CrossQ

from trading_rl.training.params import ACTIVATIONS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_common import apply_overrides  # noqa: E402
from chain_controls import (  # noqa: E402
    add_market_arguments,
    build_env_spec,
    chain_sections,
    market_params,
    oracle_yardstick,
    score,
)
from chain_summary import PAIR_KEYS, markdown_table, summarise_agents  # noqa: E402
from controls import bootstrap_median_ci  # noqa: E402
from learner_probes import MechanismProbe, collapse_columns, collapse_table  # noqa: E402
from learning_curve import load_parameters  # noqa: E402

RUN_KEYS = ["variant", *PAIR_KEYS]
# Issue 43's sample-efficiency checkpoints: capture at these shares of the budget.
BUDGET_SHARES = (0.25, 0.5, 1.0)


def parse_variant(text: str) -> tuple[str, list[str], dict | None]:
    """``"name key=value ..."`` -> ``(name, parameter overrides, CrossQ options or None)``: the pair
    ``learner=crossq`` trains sb3-contrib's CrossQ instead of the phase's SAC, ``crossq.KEY=VALUE``
    sets its keyword ``KEY`` (``crossq.qf=[256,256]``: its critics' widths)."""
    name, *pairs = text.split()
    bad = [pair for pair in pairs if "=" not in pair]
    if bad:
        raise SystemExit(f"--variant {name!r}: expected dotted.key=value, got {bad[0]!r}")
    learner, crossq, overrides = "sac", {}, []
    for pair in pairs:
        key, _, raw = pair.partition("=")
        if key == "learner":
            learner = raw
        elif key.startswith("crossq."):
            crossq[key.removeprefix("crossq.")] = yaml.safe_load(raw)
        else:
            overrides.append(pair)
    if learner not in ("sac", "crossq"):
        raise SystemExit(f"--variant {name!r}: learner must be sac or crossq, got {learner!r}")
    return name, overrides, (crossq if learner == "crossq" else None)


class ScaledCrossQ(CrossQ):
    """sb3-contrib's CrossQ reading its sampled rewards times ``reward_scale``, as ``SACWithICM`` does
    (the phase's reward scale is part of the learner, not of the env)."""

    def __init__(self, *args, reward_scale: float, **kwargs) -> None:
        self.reward_scale = reward_scale
        super().__init__(*args, **kwargs)

    def train(self, gradient_steps: int, batch_size: int = 64) -> None:
        buffer = self.replay_buffer
        sample = buffer.sample

        def scaled(*args, **kwargs):
            batch = sample(*args, **kwargs)
            return batch._replace(rewards=batch.rewards * self.reward_scale)

        buffer.sample = scaled  # type: ignore[method-assign]
        try:
            super().train(gradient_steps, batch_size)
        finally:
            del buffer.sample


def build_learner(env, agent_params, seed: int, crossq: dict | None):
    """The phase's agent (``build_agent``), or CrossQ with the agent section's SAC settings that
    CrossQ has (no target network: no ``tau``, ``target_update_interval``) and ``crossq`` on top."""
    from trading_rl.algorithms.sac_icm.sac_icm import build_agent

    if crossq is None:
        return build_agent(env, agent_params, seed=seed, device="cpu")
    sac = {k: v for k, v in agent_params.sac.to_dict().items() if k not in ("tau", "target_update_interval")}
    options = dict(crossq)
    policy = agent_params.policy
    net_arch = {"pi": list(policy.net_arch), "qf": list(options.pop("qf", policy.net_arch))}
    policy_kwargs = {"net_arch": net_arch, "activation_fn": ACTIVATIONS[policy.activation]}
    return ScaledCrossQ(
        "MlpPolicy",
        env,
        reward_scale=agent_params.reward_scale,
        **{**sac, **options},
        policy_kwargs=policy_kwargs,
        seed=seed,
        device="cpu",
    )


def train_with_curve(
    env_spec, sections: dict, seed: int, curve_every: int, attribute, yardstick, edge: bool, crossq: dict | None
):
    """Train ``sac_icm``'s agent for its budget; the scored deterministic policy every ``curve_every``
    steps and at the end, each with the training seconds spent so far (scoring time excluded) and
    what the switched-on mechanisms did since the checkpoint before (``MechanismProbe``)."""
    from stable_baselines3.common.callbacks import BaseCallback

    from trading_rl.envs.continuous import trading_env
    from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode

    phase = sections["sac_icm"]
    make_eval_env = lambda: env_spec.make_env(phase.evaluation_split, evaluation=True)  # noqa: E731
    hold_threshold = trading_env(make_eval_env(), "learner_controls").config.hold_threshold
    points: list[dict] = []
    clock = {"started": time.perf_counter(), "scoring": 0.0}

    def checkpoint(model) -> None:
        began = time.perf_counter()
        rollout = run_episode(make_eval_env(), policy_from_sb3(model), seed=seed)
        train_seconds = began - clock["started"] - clock["scoring"]
        points.append({"step": model.num_timesteps, "train_seconds": round(train_seconds, 2)})
        points[-1].update(score(rollout, attribute, yardstick, edge))
        points[-1].update(probe.read())
        points[-1].update(collapse_columns(rollout, hold_threshold, phase.agent.collapse))
        clock["scoring"] += time.perf_counter() - began

    class Curve(BaseCallback):
        def _on_step(self) -> bool:
            if self.model.num_timesteps % curve_every == 0:
                checkpoint(self.model)
            return True

    model = build_learner(env_spec.make_env("train", seed=seed), phase.agent, seed, crossq)
    probe = MechanismProbe(model)
    budget = phase.agent.training.total_timesteps
    model.learn(total_timesteps=budget, callback=Curve(), log_interval=10**9)
    if not points or points[-1]["step"] != model.num_timesteps:
        checkpoint(model)
    return points


def run_one(
    variant: str, crossq: dict | None, env_spec, sections: dict, market: str, realisation: int, seed: int, every: int
):
    """One variant on one market and seed: one row per checkpoint."""
    import torch

    torch.set_num_threads(1)
    family = market.partition(":")[0]
    yardstick, attribute = oracle_yardstick(env_spec, sections["sac_icm"].evaluation_split, seed)
    started = time.perf_counter()
    points = train_with_curve(env_spec, sections, seed, every, attribute, yardstick, family != "null", crossq)
    final = points[-1]
    print(
        f"{variant} {market} r{realisation} s{seed}: capture {final['capture']:.2f} "
        f"in {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    keys = {"variant": variant, "family": family, "market": market, "realisation": realisation, "seed": seed}
    return [{**keys, **point, "final": point is final} for point in points]


def seconds_to_skill(curve: pd.DataFrame, bar: float) -> pd.DataFrame:
    """Per run with a curve: the training seconds and steps of the first checkpoint with capture >= ``bar``
    (``reached``) and of the first from which every later checkpoint stays >= ``bar`` (``held``; the
    curve swings, so a first crossing can be lost again); NaN where none; ``late_swing``, the median
    change of capture between consecutive checkpoints of the budget's second half (how far the
    policy still moves), and ``late_negative``, the share of those checkpoints whose timing is
    backwards (capture < 0); the run's training seconds."""
    out = []
    for run, group in curve.sort_values("step").groupby(RUN_KEYS, sort=False):
        if len(group) < 2:  # a final score without its curve (a run of another benchmark): no time to skill
            continue
        above = (group["capture"] >= bar).to_numpy()
        held_from = np.flatnonzero(~above)
        first_held = held_from[-1] + 1 if held_from.size else 0
        row = dict(zip(RUN_KEYS, run))
        for label, index in (("reached", np.argmax(above) if above.any() else None), ("held", first_held)):
            point = group.iloc[index] if index is not None and index < len(group) else None
            row[f"seconds_{label}"] = float(point["train_seconds"]) if point is not None else np.nan
            row[f"steps_{label}"] = float(point["step"]) if point is not None else np.nan
        late = group[group["step"] > group["step"].max() / 2]["capture"].to_numpy()
        row["late_swing"] = float(np.median(np.abs(np.diff(late)))) if late.size > 1 else np.nan
        row["late_negative"] = float(np.mean(late < 0)) if late.size else np.nan
        out.append({**row, "train_seconds": float(group["train_seconds"].max())})
    return pd.DataFrame(out)


def skill_table(curve: pd.DataFrame, bar: float) -> str:
    """Per variant x family: runs reaching the bar and holding it to the end, median training seconds
    and steps to each (over the runs that do) and median training seconds per run."""
    found = seconds_to_skill(curve[curve["family"] != "null"], bar)
    if found.empty:
        return "(no run with a curve on an edge family)"
    lines = [
        f"| family | variant | runs reaching capture {bar:g} | median s (steps) to it | "
        "runs holding it to the end | median s (steps) from which held | late swing | late checkpoints < 0 | "
        "median train s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (family, variant), group in found.groupby(["family", "variant"], sort=False):
        cells = []
        for label in ("reached", "held"):
            done = group.dropna(subset=[f"seconds_{label}"])
            cells += [
                f"{len(done)}/{len(group)}",
                f"{done[f'seconds_{label}'].median():.0f} ({done[f'steps_{label}'].median():.0f})",
            ]
        swing, negative = group["late_swing"].median(), group["late_negative"].mean()
        seconds = group["train_seconds"].median()
        lines.append(f"| {family} | {variant} | {' | '.join(cells)} | {swing:.2f} | {negative:.0%} | {seconds:.0f} |")
    return "\n".join(lines)


def final_rows(curve: pd.DataFrame, reference: str) -> pd.DataFrame:
    """The final checkpoints as ``chain_summary`` rows: each variant an agent, paired with
    ``reference`` where it ran on the same market and seed (unpaired runs still count as runs)."""
    final = curve[curve["final"].astype(bool)]
    ran = set(map(tuple, final.loc[final["variant"] == reference, PAIR_KEYS].astype(str).to_numpy()))
    paired = [tuple(row) in ran for row in final[PAIR_KEYS].astype(str).to_numpy()]
    inputs = np.where((final["variant"] != reference) & np.array(paired, dtype=bool), reference, "")
    return final.assign(agent=final["variant"], input=inputs)


def at_budget_shares(curve: pd.DataFrame, shares: tuple[float, ...]) -> pd.DataFrame:
    """Each run's checkpoint at each share of its budget (its last step), with a ``share`` column; a
    run without a checkpoint there is an error naming ``--curve-every``."""
    rows = []
    for run, group in curve.groupby(RUN_KEYS, sort=False):
        budget = int(group["step"].max())
        for share in shares:
            found = group[group["step"] == round(share * budget)]
            if found.empty:
                raise ValueError(
                    f"run {dict(zip(RUN_KEYS, run))} has no checkpoint at {share:.0%} of its {budget}-step "
                    f"budget (step {share * budget:g}): choose a --curve-every that divides it"
                )
            rows.append({**found.iloc[0].to_dict(), "share": share})
    return pd.DataFrame(rows)


def _median_ci(values: pd.Series, rng: np.random.Generator) -> str:
    finite = values.to_numpy(dtype=float)
    finite = finite[np.isfinite(finite)]
    if not finite.size:
        return "n/a"
    low, high = bootstrap_median_ci(finite, rng)  # NaN from fewer than 2 runs
    return f"{np.median(finite):.2f} [{low:.2f}, {high:.2f}]".replace("nan", "n/a")


def _mechanism_cell(group: pd.DataFrame) -> str:
    cells = []
    if "aux_update_share" in group and group["aux_update_share"].notna().any():
        cells.append(f"aux share {group['aux_update_share'].median():.2f}")
    if "curriculum_stage" in group and group["curriculum_stage"].notna().any():
        stages = group["curriculum_stage"].dropna().astype(int)
        cells.append(f"stage {stages.min()}–{stages.max()}")
    return ", ".join(cells) or "—"


def budget_table(curve: pd.DataFrame, reference: str, shares: tuple[float, ...] = BUDGET_SHARES) -> str:
    """Per family x variant x share of the budget: capture median [90% CI], skill, the paired capture
    difference against ``reference`` at the same step (same market and seed) and the mechanism's
    state there (median auxiliary share of the encoder's movement, the curriculum's stages)."""
    rng = np.random.default_rng(0)
    points = at_budget_shares(curve, shares)
    own = points[points["variant"] == reference][PAIR_KEYS + ["share", "capture"]]
    joined = points.merge(own.rename(columns={"capture": "capture_reference"}), on=PAIR_KEYS + ["share"], how="left")
    lines = [
        f"| family | variant | share of budget (step) | runs | capture, median [90% CI] | skill | "
        f"paired Δ vs {reference} [90% CI] | pairs | mechanism there |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (family, variant, share), group in joined.groupby(["family", "variant", "share"], sort=False):
        delta = group["capture"] - group["capture_reference"]
        pairs = int(delta.notna().sum()) if variant != reference else 0
        paired = _median_ci(delta, rng) if pairs else "—"
        step = int(group["step"].median())
        lines.append(
            f"| {family} | {variant} | {share:.0%} ({step}) | {len(group)} | {_median_ci(group['capture'], rng)} | "
            f"{int(group['skill'].astype(bool).sum())}/{len(group)} | {paired} | {pairs} | {_mechanism_cell(group)} |"
        )
    return "\n".join(lines)


def report(curve: pd.DataFrame, variants: list[str], bar: float) -> str:
    final = final_rows(curve, variants[0])
    summary = summarise_agents(final, variants)
    skill = skill_table(curve, bar)
    try:
        budget = budget_table(curve, variants[0])
    except ValueError as error:  # curves scored every 1,000 steps before the table existed
        budget = f"(not available: {error})"
    collapse = collapse_table(final, variants[0])
    return (
        f"{markdown_table(summary)}\n\nCollapse of the scored (deterministic) policy, the phase's gates:\n\n"
        f"{collapse}\n\nTime to skill (training seconds, scoring excluded):\n\n{skill}\n\n"
        f"Capture by share of the budget, paired with {variants[0]} at the same step:\n\n{budget}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_market_arguments(parser)
    parser.add_argument("--variant", action="append", default=[], help='"name dotted.key=value ..." (first: reference)')
    parser.add_argument(
        "--curve-every",
        type=int,
        default=500,
        help="score the policy every this many steps (dividing 25%% of the budget)",
    )
    parser.add_argument("--skill-capture", type=float, default=0.5, help="the capture that counts as skill reached")
    parser.add_argument("--jobs", type=int, default=1, help="parallel processes (1 torch thread each)")
    parser.add_argument("--out", default="docs/results/learner_controls.csv")
    parser.add_argument("--from-csv", nargs="+", help="summarise these CSVs again, together (no training)")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.from_csv:
        curve = pd.concat([pd.read_csv(path, keep_default_na=False, na_values=[""]) for path in args.from_csv])
    else:
        curve = train_all(args)
        curve.to_csv(out, index=False)
    variants = list(dict.fromkeys(curve["variant"]))
    text = report(curve, variants, args.skill_capture)
    print(text)
    out.with_suffix(".md").write_text(f"`{shlex.join(sys.argv)}`\n\n{text}")


def train_all(args: argparse.Namespace) -> pd.DataFrame:
    """Every variant x family x realisation x seed, ``args.jobs`` processes at a time."""
    variants = [parse_variant(text) for text in (args.variant or ["base"])]
    base = load_parameters(args.env)
    work = tempfile.gettempdir()  # resume folders the sections name; no resume slot is written here
    jobs = []
    for market in args.families:
        for realisation in args.realisations:
            for name, overrides, crossq in variants:
                params = apply_overrides(market_params(base, market, realisation, args.n_bars), overrides)
                sections = chain_sections(params, f"{work}/{name}")
                spec = build_env_spec(sections)
                jobs += [
                    (name, crossq, spec, sections, market, realisation, seed, args.curve_every) for seed in args.seeds
                ]
    partial_path = Path(f"{args.out}.partial.csv")
    partial_path.unlink(missing_ok=True)
    started, rows = time.perf_counter(), []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for future in as_completed([pool.submit(run_one, *job) for job in jobs]):
            found = future.result()
            rows += found
            pd.DataFrame(found).to_csv(partial_path, mode="a", header=not partial_path.exists(), index=False)
    seconds = time.perf_counter() - started
    print(f"{len(jobs)} run(s) in {seconds:.0f} s, {args.jobs} process(es), {os.cpu_count()} core(s)")
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()

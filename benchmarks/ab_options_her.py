"""A/B of the options_her phase over seeds: with/without HER × with/without options.

Every variant warm-starts from the same SAC+ICM model and trains with the same budget (the
``options_her`` parameters of the chosen Kedro env), then is evaluated on the validation split next
to the baselines. Prints one row per variant × seed and the median per variant, and appends one
trial-ledger row per variant (``--ledger``).

    python benchmarks/ab_options_her.py [--env base] [--seeds 0 1 2] [--jobs 1] [--out ab_options_her.json]
                                        [--inputs DIR | --dump-inputs DIR] [--variants NAME ...]
                                        [--ledger DIR | --no-ledger]

Needs a finished ``kedro run`` up to ``sac_icm`` (it reads the latest ``env_spec`` and
``sac_icm_model`` from the catalog), or ``--inputs DIR`` written by ``--dump-inputs DIR``.
"""

from __future__ import annotations

import copy
import hashlib
import io

from ab_common import load_inputs, parse_args, record_trials, report, run_all

VARIANTS = {
    "options+HER": {"options": True, "her": True},
    "options": {"options": True, "her": False},
    "HER": {"options": False, "her": True},
    "plain SAC fine-tune": {"options": False, "her": False},
}


def _variant_params(params: dict, options: bool, her: bool) -> dict:
    variant = copy.deepcopy(params)
    variant.setdefault("options", {})["enabled"] = options
    variant.setdefault("her", {})["enabled"] = her
    return variant


def run_one(spec, source_bytes: bytes, params: dict, name: str, seed: int) -> dict:
    import torch

    from trading_rl.algorithms.options_her.from_spec import (
        PARAMS_PREFIX,
        OptionsHerParams,
        evaluate_from_spec,
        train_from_spec,
    )
    from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
    from trading_rl.phases.options_her import option_gates

    torch.set_num_threads(1)
    source = SACWithICM.load(io.BytesIO(source_bytes), device="cpu")
    variant = OptionsHerParams.from_mapping(_variant_params(params["options_her"], **VARIANTS[name]), PARAMS_PREFIX)
    agent, _, stats = train_from_spec(spec, source, variant, seed, device="cpu")
    result = evaluate_from_spec(agent, spec, variant, seed)
    share = result["option_share"] or {}
    gates = option_gates(stats, variant.gates) if stats else []
    return {
        "variant": name,
        "seed": seed,
        "split": result["split"],
        "val_sharpe": result["metrics"]["sharpe"],
        "val_total_return": result["metrics"]["total_return"],
        "action_entropy": result["metrics"]["action_entropy"],
        "goal_achievement": result["goals"]["goal_achievement_rate"],
        "target_reached": result["goals"]["target_reached_rate"],
        "control_goal_achievement": result["goals"]["control"]["goal_achievement_rate"],
        "achievement_difference": result["goals"]["achievement_difference"],
        "achievement_difference_ci": result["goals"]["achievement_difference_ci"],
        "episode_hits": result["goals"]["episode_hits"],
        "control_episode_hits": result["goals"]["control_episode_hits"],
        "max_option_share_eval": max(share.values()) if share else None,
        "options_used_eval": sum(v > 0 for v in share.values()) if share else None,
        "option_gates_passed_train": f"{sum(g['passed'] for g in gates)}/{len(gates)}" if gates else None,
        "return_moments": result["return_moments"],
        "baselines": result["baselines"],
    }


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], "ab_options_her.json", tuple(VARIANTS))
    spec, params, source = load_inputs(args)
    jobs = [(spec, source, params, name, seed) for name in args.variants for seed in args.seeds]
    rows = run_all(run_one, jobs, args.jobs, args.out)
    report(rows, args, non_numeric=("option_gates_passed_train",))
    source_model = hashlib.sha256(source).hexdigest()[:16]
    configurations = {
        name: {"options_her": _variant_params(params["options_her"], **VARIANTS[name]), "source_model": source_model}
        for name in args.variants
    }
    record_trials(rows, args, "ab_options_her", spec, configurations)


if __name__ == "__main__":
    main()

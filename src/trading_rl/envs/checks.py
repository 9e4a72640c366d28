"""Env acceptance report: gymnasium's and SB3's env checkers on every env kind, plus a rollout sanity run.

The ``env_construction`` pipeline stores the report next to the env spec, so every trained model
can be traced to envs that passed the checkers and balance their books.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

from trading_rl.envs.spec import ENV_KINDS, EnvSpec

# The identity sum(rewards) == log(final / initial equity) holds up to float rounding of a sum.
REWARD_IDENTITY_TOLERANCE = 1e-9


def _run_checker(checker: Callable[[Any], Any], env) -> dict[str, Any]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            checker(env)
            passed, message = True, ""
        except Exception as error:  # the report records any checker failure instead of raising
            passed, message = False, f"{type(error).__name__}: {error}"
    messages = list(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))
    return {"passed": passed, "message": message, "warnings": messages}


def _scripted_action(env, step: int):
    """A fixed, policy-free action sequence that visits buys, sells and holds."""
    signal = math.sin(0.3 * step)
    if env.action_space.shape == (1,):
        return np.array([signal], dtype=np.float32)
    return env.migrator.to_discrete(signal)


def _rollout(env) -> tuple[list[float], list[float], int]:
    _, info = env.reset()
    initial = info["equity"]
    equities, trades = [initial], 0
    rewards: list[float] = []
    done = False
    while not done:
        _, reward, terminated, truncated, info = env.step(_scripted_action(env, len(rewards)))
        equities.append(info["equity"])
        rewards.append(float(reward))
        trades += info["trade_units"] != 0.0
        done = terminated or truncated
    return equities, rewards, trades


def rollout_sanity(spec: EnvSpec, split: str, kind: str = "continuous") -> dict[str, Any]:
    """Deterministic evaluation pass over ``split``, twice: coverage, P&L identity, repeatability."""
    env = spec.make_env(split, kind=kind, evaluation=True)
    equities, rewards, trades = _rollout(env)
    repeat_equities, _, _ = _rollout(env)
    expected_steps = env.n_bars - 1 - env.first_tradable_bar
    identity_error = abs(sum(rewards) - math.log(equities[-1] / equities[0]))
    result = {
        "split": split,
        "kind": kind,
        "steps": len(rewards),
        "expected_steps": expected_steps,
        "trades": int(trades),
        "initial_equity": float(equities[0]),
        "final_equity": float(equities[-1]),
        "reward_sum": float(sum(rewards)),
        "reward_identity_error": float(identity_error),
        "deterministic": repeat_equities == equities,
    }
    result["passed"] = bool(
        result["steps"] == expected_steps and identity_error < REWARD_IDENTITY_TOLERANCE and result["deterministic"]
    )
    return result


def env_check_report(spec: EnvSpec, check_split: str = "train") -> dict[str, Any]:
    """JSON-serialisable report: checker results per env kind, layout, and rollout sanity per split."""
    # imported here: registering the pipelines (every kedro command) must not pay for it (torch)
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    checks: dict[str, Any] = {}
    for kind in ENV_KINDS:
        checks[kind] = {
            "gymnasium": _run_checker(
                # The envs have no render modes, so there is nothing to render-check.
                partial(gymnasium_check_env, skip_render_check=True),
                spec.make_env(check_split, kind=kind, seed=0),
            ),
            "sb3": _run_checker(sb3_check_env, spec.make_env(check_split, kind=kind, seed=0)),
        }
    rollouts = {split: rollout_sanity(spec, split) for split in spec.prices}
    layout = spec.layout
    passed = all(result["passed"] for by_checker in checks.values() for result in by_checker.values())
    passed = passed and all(r["passed"] for r in rollouts.values())
    return {
        "symbol": spec.symbol,
        "passed": bool(passed),
        "obs_dim": int(layout.dim),
        "layout_names": layout.names,
        "layout": layout.to_dict(),
        "config": spec.config_data(),
        "checks": checks,
        "rollouts": rollouts,
    }

"""The env checks node; the spec itself is ``envs.symbol_env_spec``, wired in ``pipeline.py``."""

from __future__ import annotations

from typing import Any

from trading_rl.envs import EnvSpec, env_check_report


def check_env(env_spec: EnvSpec) -> dict[str, Any]:
    report = env_check_report(env_spec)
    if not report.get("passed", False):
        raise ValueError(f"env checks failed for symbol '{env_spec.symbol}': {report}")
    return report

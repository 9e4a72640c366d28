"""Where a result came from: a stable hash of the parameters that define it, the version of the
algorithm code that learned it, and the git commit.

Used by the Kedro hooks (``run_metadata``) and by the trial ledger, inside and outside Kedro.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

# The version of the code that decides what an agent learns and how it is scored (the packages in
# BEHAVIOUR_PACKAGES). It is part of every trial's identity: the same parameters under other
# algorithm code are another configuration. tests/test_provenance.py fails when the code's digest
# moves away from ALGORITHM_SOURCE_DIGEST, so a behaviour change cannot land without a bump.
# 2 (2026-12-06): the code defaults became the validated learner's (target action, one bar, [32, 32],
# no curiosity), so a configuration that leaves those keys unwritten now means other values.
ALGORITHM_VERSION = 2
ALGORITHM_SOURCE_DIGEST = "012deb216f91e24f"
BEHAVIOUR_PACKAGES = ("algorithms", "data", "envs", "features", "phases", "rewards", "training", "seeding.py")
# Floats are compared at this many significant digits: a change below it (1e-19 on a learning rate
# of 3e-4) cannot reach float32 weights and is not a new configuration.
FLOAT_DIGITS = 12


def config_hash(parameters: dict[str, Any]) -> str:
    """Stable short hash of the resolved parameters (key order does not matter)."""
    payload = json.dumps(parameters, sort_keys=True, default=str).encode()
    return hashlib.sha256(payload).hexdigest()[:16]


def canonical(value: Any) -> Any:
    """``value`` with floats rounded to ``FLOAT_DIGITS`` significant digits and tuples as lists, so
    that what cannot differ in behaviour does not differ in identity."""
    if isinstance(value, dict):
        return {str(key): canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.{FLOAT_DIGITS}g}")
    return value


def behaviour_source_digest(root: Path | None = None, packages: tuple[str, ...] = BEHAVIOUR_PACKAGES) -> str:
    """sha256 of the syntax trees (docstrings left out, so comments, docstrings and formatting do not
    count) of the modules in ``packages`` under ``root`` (default: trading_rl's behaviour packages),
    in path order."""
    root = root or Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in packages:
        paths = [root / name] if name.endswith(".py") else sorted((root / name).rglob("*.py"))
        for path in paths:
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                body = getattr(node, "body", None)
                if (
                    isinstance(body, list)
                    and body
                    and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)
                ):
                    node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
            digest.update(str(path.relative_to(root)).encode())
            digest.update(ast.dump(tree, include_attributes=False).encode())
    return digest.hexdigest()[:16]


def identity_hash(configuration: dict[str, Any]) -> str:
    """The identity of a configuration: ``config_hash`` of its ``canonical`` form (the configuration
    itself is recorded as given)."""
    return config_hash(canonical(configuration))


def git_commit() -> str:
    """The checked-out commit, with ``+dirty`` when tracked files differ from it (the code that ran
    is then not that commit's); ``unknown`` outside a git checkout."""
    try:
        run = partial(subprocess.run, capture_output=True, text=True, timeout=5, check=True)
        head = run(["git", "rev-parse", "HEAD"])
        changes = run(["git", "status", "--porcelain", "--untracked-files=no"])
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + ("+dirty" if changes.stdout.strip() else "")

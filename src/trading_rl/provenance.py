"""Where a result came from: a stable hash of the parameters that define it, and the git commit.

Used by the Kedro hooks (``run_metadata``) and by the trial ledger, inside and outside Kedro.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from typing import Any


def config_hash(parameters: dict[str, Any]) -> str:
    """Stable short hash of the resolved parameters (key order does not matter)."""
    payload = json.dumps(parameters, sort_keys=True, default=str).encode()
    return hashlib.sha256(payload).hexdigest()[:16]


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"

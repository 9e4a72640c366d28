"""The served model's decision log: one JSON object per line, appended, never rewritten.

Each decision and each refused request is one line (``status``: ``decided`` / ``refused``), written
under the decider's lock, so lines are in decision order. The file is opened in append mode for
each line: rotating or deleting it between requests is safe.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

# Where the log goes: this variable's path, else DEFAULT_DECISION_LOG under the server's working
# directory (the project root: where `trading-rl dashboard` reads it); an empty value switches the
# log off.
DECISION_LOG_ENV = "TRADING_RL_DECISION_LOG"
DEFAULT_DECISION_LOG = "data/08_reporting/serving/decisions.jsonl"


class DecisionLog:
    """Append-only JSON lines at ``path`` (``None``: nothing is written)."""

    def __init__(self, path: str | Path | None):
        self.path = None if path is None else Path(path)

    @classmethod
    def configured(cls) -> DecisionLog:
        """The file ``TRADING_RL_DECISION_LOG`` names (set but empty: no log); unset,
        ``DEFAULT_DECISION_LOG`` in the working directory (of ``mlflow models serve``: where it was
        started), made absolute now."""
        configured = os.environ.get(DECISION_LOG_ENV)
        if configured is not None:
            return cls(Path(configured).absolute() if configured else None)
        return cls(Path.cwd() / DEFAULT_DECISION_LOG)

    def write(self, entry: dict[str, Any]) -> None:
        if self.path is None:
            return
        line = json.dumps(entry, separators=(",", ":"), default=str)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(line + "\n")

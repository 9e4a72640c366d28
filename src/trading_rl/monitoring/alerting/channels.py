"""The channels an alert is sent to: the log, an append-only JSON-lines file, an HTTP webhook. A
channel's ``send`` may fail; ``dispatcher.dispatch`` keeps each one isolated."""

from __future__ import annotations

import http.client
import json
import logging
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Protocol

from trading_rl.monitoring.alerting.alert import Alert, moment_of

logger = logging.getLogger(__name__)


class Channel(Protocol):
    """Where an alert goes. ``send`` returns whether it was delivered; it may raise, :func:`dispatch`
    logs that and carries on with the other channels."""

    name: str

    def send(self, alert: Alert) -> bool: ...


class LogChannel:
    """Logs each alert at its level (``logging.INFO`` / ``WARNING`` / ``CRITICAL``)."""

    name = "log"

    def __init__(self, log: logging.Logger | None = None) -> None:
        self.log = log or logger

    def send(self, alert: Alert) -> bool:
        self.log.log(
            int(alert.level),
            "alert %s [%s] at %s: %s (value %s, threshold %s)",
            alert.rule,
            alert.level.label,
            alert.timestamp,
            alert.message,
            alert.value,
            alert.threshold,
        )
        return True


class AlertFileError(ValueError):
    """The JSON-lines alerts file holds something other than JSON lines; it was left unchanged."""


class JsonLinesChannel:
    """Appends one JSON object per alert to ``path`` (mode ``"a"``: existing lines are never
    rewritten). The file's existing content is checked once before the first append, and
    :meth:`read` refuses a file that is not JSON lines with :class:`AlertFileError` naming the file
    and the line, without touching it."""

    name = "jsonl"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._checked = False

    def read(self) -> list[dict[str, Any]]:
        """Every alert written so far (``[]`` when the file does not exist yet)."""
        if not self.path.exists():
            return []
        content = self.path.read_bytes()
        lines = content.split(b"\n")
        if lines[-1] != b"":
            raise AlertFileError(
                f"{self.path}: line {len(lines)} does not end with a newline: not a JSON-lines alerts file "
                "(or a write was cut off); appending would join two lines. The file was left unchanged: "
                "move it away or repair that line, or set alerting.channels.jsonl to another path"
            )
        alerts = []
        for number, line in enumerate(lines[:-1], start=1):
            try:
                data = json.loads(line.decode("utf-8"))
                if not isinstance(data, dict) or not {"rule", "level", "timestamp"} <= set(data):
                    raise ValueError("not an alert object with rule, level and an ISO 8601 timestamp")
                Alert.from_dict(data)
                moment_of(str(data["timestamp"]))
            except (ValueError, TypeError) as error:  # JSONDecodeError, UnicodeDecodeError: ValueErrors
                raise AlertFileError(
                    f"{self.path}: line {number} is not an alert in JSON ({error}): not a JSON-lines alerts file. "
                    "The file was left unchanged: move it away or repair that line, or set "
                    "alerting.channels.jsonl to another path"
                ) from None
            alerts.append(data)
        self._checked = True
        return alerts

    def send(self, alert: Alert) -> bool:
        if not self._checked:
            self.read()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(alert.to_dict(), sort_keys=True, allow_nan=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as file:  # append-only: never rewrite a line
            file.write(line)
        return True


class WebhookChannel:
    """POSTs each alert as a JSON body to ``url``; a refused connection, a timeout or an HTTP error
    status is logged (the URL's path and query left out: they often hold a token), never raised."""

    name = "webhook"

    def __init__(self, url: str, timeout_s: float = 2.0) -> None:
        self.url = url
        self.timeout_s = float(timeout_s)

    @property
    def host(self) -> str:
        parts = urllib.parse.urlsplit(self.url)  # no user, password, path or query: they may hold a token
        return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")

    def send(self, alert: Alert) -> bool:
        body = json.dumps(alert.to_dict(), sort_keys=True, allow_nan=False).encode("utf-8")
        request = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
        except (OSError, ValueError, http.client.HTTPException) as error:  # URLError, HTTPError, timeouts: OSError
            logger.error("alert webhook %s: %s [%s] not delivered: %s", self.host, alert.rule, alert.level.label, error)
            return False
        return True

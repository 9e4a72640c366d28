"""The one place third-party warnings the project knows about are silenced (imported by
``settings.py``, so every ``kedro`` command and session applies it). Each entry says why it is
noise here; anything not listed still shows."""

from __future__ import annotations

import warnings

KNOWN_WARNINGS = (
    # omegaconf renamed register_new_resolver; kedro 1.7 and kedro-mlflow 2.0.3 still call the old name.
    (UserWarning, r"register_new_resolver\(\) is deprecated"),
    # multi_symbol names its datasets `<symbol>.<name>` on purpose: the symbol is the namespace.
    (UserWarning, r"One or more dataset names contain '\.' characters"),
)


def quiet_known_warnings() -> None:
    for category, message in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)

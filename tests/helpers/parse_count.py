"""Counts the parses of each top-level parameter section (``Section.from_mapping`` with a section's
own key as prefix) while a run goes on, the resolution cache emptied first: what the parse-once
rule (``integration.parameter_sections.resolved_section``) is checked by."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from trading_rl.config import Section
from trading_rl.integration import parameter_sections


def count_section_parses(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    parses: Counter[str] = Counter()
    original = Section.__dict__["from_mapping"].__func__

    def counting(cls: type[Section], mapping: Any = None, prefix: str = "", base: Any = None) -> Any:
        if prefix in parameter_sections.SECTIONS and not isinstance(mapping, Section):
            parses[prefix] += 1
        return original(cls, mapping, prefix, base)

    monkeypatch.setattr(Section, "from_mapping", classmethod(counting))
    monkeypatch.setattr(parameter_sections, "_RESOLVED", {})
    return parses

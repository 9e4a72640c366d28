"""The documentation cannot drift from itself or from the code: docs/README.md links every page,
every relative link between the pages (and from the README) lands on a file and, with ``#``, on a
heading; modules.md's entry points import and every package has its heading there; architecture.md
stays a one-page map."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "src" / "trading_rl"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_BLOCK = re.compile(r"^```.*?^```", re.M | re.S)


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def links(page: Path) -> list[str]:
    return [target for target in LINK.findall(CODE_BLOCK.sub("", page.read_text())) if "://" not in target]


def anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to dashes, repeats numbered."""
    found: set[str] = set()
    for heading in re.findall(r"^#+ (.+)$", CODE_BLOCK.sub("", page.read_text()), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def test_the_index_links_every_page():
    linked = {target.split("#")[0] for target in links(DOCS / "README.md")}
    assert sorted(page.name for page in pages() if page.name != "README.md" and page.name not in linked) == []


@pytest.mark.parametrize("page", [*pages(), ROOT / "README.md"], ids=lambda page: page.name)
def test_every_link_lands(page):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT)}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    assert broken == []


def entry_points() -> dict[str, list[str]]:
    """modules.md, "Entry points by package": package -> the names each bullet documents (the
    backticked names before its dash)."""
    text = (DOCS / "modules.md").read_text()
    found: dict[str, list[str]] = {}
    for block in re.split(r"^## ", text, flags=re.M)[1:]:
        package = re.match(r"`([\w.]+)`", block).group(1)
        names = found.setdefault(package, [])
        for bullet in re.findall(r"^- (.*?)(?=^- |\Z)", block, re.M | re.S):
            subject = re.split(r"\s—\s", bullet, maxsplit=1)[0]
            names += [re.match(r"[\w.]+", code).group(0) for code in re.findall(r"`([^`]+)`", subject)]
    return found


def resolve(package: str, name: str) -> object:
    """``package.name``: modules imported as far as they go, then attributes."""
    parts = f"{package}.{name}".split(".")
    for split in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            value = getattr(value, attribute)
        return value
    raise ModuleNotFoundError(name)


def test_every_documented_entry_point_exists():
    missing = []
    for package, names in entry_points().items():
        for name in names:
            try:
                resolve(package, name)
            except (ImportError, AttributeError) as error:
                missing.append(f"{package}: {name} ({error})")
    assert missing == []


def test_every_package_has_its_heading():
    documented = set(entry_points())
    packages = {f"trading_rl.{path.parent.name}" for path in PACKAGE.glob("*/__init__.py")}
    assert sorted(packages - documented) == []
    assert all(entry_points().values())


def test_a_name_that_is_gone_is_caught():
    with pytest.raises(AttributeError):
        resolve("trading_rl.runtime", "symbols.SharedEncoder")


def pytest_invocations(text: str) -> list[str]:
    """Each ``python -m pytest ...`` of ``text`` (a shell line or chain), without ``--durations``."""
    commands = [part.split("#")[0].strip() for line in text.splitlines() for part in line.split("&&")]
    return [
        re.sub(r"\s*--durations=\d+", "", command) for command in commands if command.startswith("python -m pytest")
    ]


def test_ci_runs_the_readme_test_command():
    """`.ci/run` runs exactly README command 2's tests (it may add ``--durations``)."""
    readme = (ROOT / "README.md").read_text()
    command_2 = readme[readme.index("2. Set up and run the tests") :].split("```")[1]
    assert pytest_invocations(command_2)
    assert pytest_invocations((ROOT / ".ci/run").read_text()) == pytest_invocations(command_2)


def test_the_architecture_page_is_a_one_page_map():
    assert len((DOCS / "architecture.md").read_text().splitlines()) <= 150

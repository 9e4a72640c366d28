"""The algorithm version in every trial's identity moves with the code that decides what is learned."""

from __future__ import annotations

from trading_rl.provenance import ALGORITHM_SOURCE_DIGEST, ALGORITHM_VERSION, behaviour_source_digest, canonical


def test_a_behaviour_change_forces_an_algorithm_version_bump():
    digest = behaviour_source_digest()
    assert digest == ALGORITHM_SOURCE_DIGEST, (
        "the code of trading_rl's behaviour packages (provenance.BEHAVIOUR_PACKAGES) changed: if what an "
        "agent learns or how it is scored may have changed, bump provenance.ALGORITHM_VERSION (now "
        f"{ALGORITHM_VERSION}: every later trial is then a configuration of its own); either way set "
        f"provenance.ALGORITHM_SOURCE_DIGEST = {digest!r}"
    )


def test_the_digest_ignores_docstrings_comments_and_formatting(tmp_path):
    package = tmp_path / "agents"
    package.mkdir()
    (package / "a.py").write_text('def f(x):\n    """Why."""\n    return x + 1  # note\n')
    before = behaviour_source_digest(tmp_path, ("agents",))
    (package / "a.py").write_text('def f(x):\n    """Another why."""\n\n    return (x + 1)\n')
    assert behaviour_source_digest(tmp_path, ("agents",)) == before
    (package / "a.py").write_text("def f(x):\n    return x + 2\n")
    assert behaviour_source_digest(tmp_path, ("agents",)) != before


def test_floats_below_twelve_digits_are_one_value():
    assert canonical({"lr": 3e-4 + 1e-19}) == canonical({"lr": 3e-4})
    assert canonical({"lr": 3e-4 * (1 + 1e-9)}) != canonical({"lr": 3e-4})


def test_the_recorded_commit_says_when_tracked_code_differs_from_it(tmp_path, monkeypatch):
    """A run from an edited checkout is not that commit's code: ``+dirty``; untracked files (data,
    outputs) do not count; outside a checkout, ``unknown``."""
    import subprocess

    from trading_rl.provenance import git_commit

    monkeypatch.chdir(tmp_path)
    assert git_commit() == "unknown"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "code.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "code.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "output.json").write_text("{}")
    assert git_commit() == head
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_commit() == f"{head}+dirty"

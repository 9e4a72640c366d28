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

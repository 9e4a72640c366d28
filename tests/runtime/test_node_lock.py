"""runtime.node_lock: one node computes at a time; a node waiting inside ``released_while_waiting``
lets another compute."""

from __future__ import annotations

import threading

from trading_rl.runtime.node_lock import holds_node_lock, node_lock, released_while_waiting

TIMEOUT_S = 10.0


def test_a_waiting_node_lets_another_compute_and_then_holds_the_lock_again():
    other_ran = threading.Event()
    seen: dict[str, bool] = {}

    def other_node() -> None:
        with node_lock():
            other_ran.set()

    with node_lock():
        thread = threading.Thread(target=other_node)
        thread.start()
        assert not other_ran.wait(0.2), "the other node computed while this one held the lock"
        with released_while_waiting():
            seen["held while waiting"] = holds_node_lock()
            seen["other ran"] = other_ran.wait(TIMEOUT_S)
        seen["held after"] = holds_node_lock()
    thread.join(TIMEOUT_S)
    assert seen == {"held while waiting": False, "other ran": True, "held after": True}
    assert not holds_node_lock()


def test_outside_a_node_waiting_releases_nothing():
    with released_while_waiting():
        assert not holds_node_lock()
    with node_lock():  # the lock is free: a release outside a node would have broken it
        assert holds_node_lock()

"""runtime.node_lock: one node computes at a time; a node waiting inside ``released_while_waiting``
lets another compute."""

from __future__ import annotations

import threading
import time

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


def test_a_node_back_from_its_wait_goes_before_nodes_not_yet_started():
    """The walk-forward hands out its next remote work as soon as the node computing now is done,
    not after every node that became ready meanwhile."""
    order: list[str] = []
    b_computing, a_back = threading.Event(), threading.Event()
    release_b = threading.Event()

    def node_b() -> None:
        with node_lock():
            b_computing.set()
            assert release_b.wait(TIMEOUT_S)
            order.append("b")

    def node_c() -> None:
        with node_lock():
            order.append("c")

    def node_a() -> None:
        with node_lock():
            with released_while_waiting():
                threading.Thread(target=node_b).start()
                assert b_computing.wait(TIMEOUT_S)
                threading.Thread(target=node_c).start()
                time.sleep(0.2)  # c now waits for its turn
            order.append("a")
            a_back.set()

    a = threading.Thread(target=node_a)
    a.start()
    assert b_computing.wait(TIMEOUT_S)
    time.sleep(0.4)  # a's wait is over: a and c both wait for b
    release_b.set()
    assert a_back.wait(TIMEOUT_S)
    a.join(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while len(order) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert order == ["b", "a", "c"]

"""The evaluator's book of announced requests (search/evaluate/held.py): a start by ticket takes
what the announcement carried, waits a little for an announcement still on its way, and answers
"not held" (the pool sends the text) where it never comes; an announcement that lands after its
request started or was withdrawn is not kept."""

from __future__ import annotations

import threading
import time

from search.evaluate.held import HeldRequests
from tests.search.evaluate.test_pool_contract import request


def test_a_start_by_ticket_takes_the_announced_request_once() -> None:
    held = HeldRequests(wait_s=0.05)
    first = request("c1")
    assert held.announced(7, first)
    assert held.claim(7) is first
    assert held.claim(7) is None  # taken: a second start by the same ticket is not served
    assert held.ids() == []


def test_a_start_waits_for_an_announcement_still_on_its_way() -> None:
    held = HeldRequests(wait_s=5.0)
    late = request("c1")
    timer = threading.Timer(0.1, held.announced, (3, late))
    timer.start()
    began = time.monotonic()
    assert held.claim(3) is late
    assert time.monotonic() - began < 4.0  # woken by the announcement, not the timeout
    timer.join()


def test_an_actor_that_lacks_the_request_says_so_and_drops_its_late_announcement() -> None:
    held = HeldRequests(wait_s=0.05)
    assert held.claim(5) is None  # a restarted actor: the pool will send the text
    assert not held.announced(5, request("c1"))  # the announcement came after: not kept, not compiled
    assert held.ids() == []


def test_withdrawn_or_started_by_text_requests_are_not_kept_even_if_announced_late() -> None:
    held = HeldRequests(wait_s=0.05)
    held.announced(1, request("c1"))
    held.withdrawn("c1")
    assert held.ids() == [] and held.claim(1) is None
    held.withdrawn("c2", 2)  # withdrawn before its announcement ran
    assert not held.announced(2, request("c2"))
    held.announced(3, request("c3"))
    held.started("c3", 4)  # started with its text under a newer ticket
    assert held.ids() == [] and not held.announced(4, request("c3"))


def test_a_newer_announcement_of_a_candidate_replaces_the_older() -> None:
    held = HeldRequests(wait_s=0.05)
    old, new = request("c1"), request("c1")
    held.announced(1, old)
    held.announced(2, new)
    assert held.ids() == ["c1"] and held.claim(1) is None and held.claim(2) is new

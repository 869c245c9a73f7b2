"""The work queue's per-structure counts, kept as candidates come and go."""

from __future__ import annotations

import collections

from population.models import Candidate, Origin
from search.engine.work_queue import WorkQueue


def cand(n: int, fingerprint: str) -> Candidate:
    return Candidate(id=f"c{n:07d}", family="toy", island=0, origin=Origin.SEED, source_sha256="0" * 64,
                     fingerprint=fingerprint, created_at=0.0, updated_at=0.0)


def recount(queue: WorkQueue) -> dict[str, int]:
    items = [*queue.pending, *queue.sent.values()]
    return dict(collections.Counter(item.candidate.fingerprint for item in items))


def test_the_counts_follow_pushes_pops_submits_and_ends():
    queue = WorkQueue()
    a, b, c, d = cand(1, "fa"), cand(2, "fa"), cand(3, "fb"), cand(4, "fb")
    for x in (a, b, c):
        queue.push(x, "src")
    queue.push(d, "src", front=True)
    counts = queue.by_structure()
    assert dict(counts) == recount(queue) == {"fa": 2, "fb": 2}
    item = queue.pop()  # d, pushed to the front
    assert item.candidate is d and dict(counts) == {"fa": 2, "fb": 1}  # popped and not (yet) sent
    queue.submitted(d, "src")
    queue.submitted(d, "src")  # sent again (a re-queued loss): counted once
    assert dict(counts) == recount(queue) == {"fa": 2, "fb": 2}
    queue.done(d.id)
    assert queue.done(d.id) is None and queue.done("c9999999") is None  # not sent: nothing to forget
    for _ in range(3):
        x = queue.pop()
        queue.submitted(x.candidate, x.source)
    queue.done(c.id)
    assert dict(counts) == recount(queue) == {"fa": 2}  # a structure with none left is gone, not 0


def test_children_are_counted_per_parent_while_queued_or_sent():
    queue = WorkQueue()
    seed = cand(1, "fa")
    kids = [Candidate(id=f"c{n:07d}", family="toy", island=0, origin=Origin.OPTUNA, parent_ids=(seed.id,),
                      source_sha256="0" * 64, fingerprint="fa", created_at=0.0, updated_at=0.0) for n in (2, 3)]
    mix = Candidate(id="c0000004", family="toy", island=0, origin=Origin.CROSSOVER, parent_ids=(seed.id, kids[0].id),
                    source_sha256="0" * 64, fingerprint="fa", created_at=0.0, updated_at=0.0)
    for x in (seed, *kids, mix):
        queue.push(x, "src")
    parents = queue.by_parent()
    assert dict(parents) == {seed.id: 3, kids[0].id: 1}  # both of a crossover's parents count
    for _ in range(4):
        item = queue.pop()
        queue.submitted(item.candidate, item.source)
    assert dict(parents) == {seed.id: 3, kids[0].id: 1}  # sent: still in flight
    queue.done(mix.id)
    queue.done(kids[1].id)
    assert dict(parents) == {seed.id: 1}

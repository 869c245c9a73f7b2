"""Migration between the islands of one family, and inspiration across families.

Migrants never cross families: a family is one line of hypotheses, and mixing
another family's members into its islands would erase the diversity that families
exist to keep.  Other families' champions are offered as read-only inspiration.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from population.config import Topology
from population.island import Island
from population.models import Candidate, Origin, State


def plan_migrations(islands: Sequence[Island], topology: Topology) -> list[tuple[Candidate, int]]:
    """(migrant source, target island) pairs, computed from the state before any move.

    ring: island i sends its best to island i+1 (mod n).
    best_to_worst: the island whose best is fastest sends it to the island whose
    best is slowest (an empty island counts as slowest).
    Copies of code the target already holds are skipped.
    """
    if len(islands) < 2:
        return []
    moves: list[tuple[Candidate, int]] = []
    if topology is Topology.RING:
        for i, island in enumerate(islands):
            best = island.best()
            if best is not None:
                moves.append((best, (i + 1) % len(islands)))
    else:
        def best_time(island: Island) -> float:
            best = island.best()
            return float("inf") if best is None else best.fitness_ms  # type: ignore[return-value]
        order = sorted(range(len(islands)), key=lambda i: (best_time(islands[i]), i))
        src, dst = order[0], order[-1]
        best = islands[src].best()
        if best is not None and src != dst:
            moves.append((best, dst))
    return [(c, t) for c, t in moves if not islands[t].contains_content(c)]


def make_migrant(source: Candidate, target_island: int, new_id: Callable[[], str], now: float) -> Candidate:
    """A verified copy on another island: same code, same measured fitness, no re-evaluation."""
    return Candidate(
        id=new_id(), family=source.family, island=target_island, parent_ids=(source.id,),
        origin=Origin.MIGRATION, source_sha256=source.source_sha256, params=source.params,
        fingerprint=source.fingerprint, generation=source.generation, created_at=now, updated_at=now,
        state=State.VERIFIED, reason=f"migrated from {source.id} (island {source.island})",
        fitness_ms=source.fitness_ms)


def inspiration(champions: dict[str, Candidate | None], family: str) -> list[Candidate]:
    """Champions of every other family, fastest first: code a mutation may read, never a member."""
    others = [c for name, c in champions.items() if name != family and c is not None]
    return sorted(others, key=lambda c: (c.fitness_ms, c.family))

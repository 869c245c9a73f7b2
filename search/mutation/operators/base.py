"""What a mutation operator is: the Protocols the proposer calls, and the child it returns.

Two kinds, told apart by ``needs_llm``:

* an :class:`ImmediateOperator` makes a child on the spot (``propose``); the loop uses these
  to fill an evaluator that would otherwise idle;
* an :class:`LLMOperator` only chooses the parents (``parents``); the proposer writes the
  prompt, the LLM pool answers asynchronously, and the answer becomes the child later, so
  that no GPU waits on an LLM call.

Operators see the search through :class:`ProposalContext` (the proposer), never the loop.
This module imports nothing heavy (no optuna, openai, torch): the config validates operator
names against the registry, and ``qrsearch status`` loads configs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, TypeVar, runtime_checkable

from kernels.params import ParamSpace
from population.models import Candidate, NewCandidate, Origin

if TYPE_CHECKING:
    from population.run import Run
    from search.mutation.tuning import Proposal, Tuner


S = TypeVar("S")


class KernelFamily(Protocol):
    """What the search needs of a registered family (kernels.families.RegisteredFamily), read-only."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def baseline(self) -> bool: ...

    @property
    def space(self) -> type[ParamSpace]: ...

    def source(self) -> str: ...

    def render(self, params: Any) -> str: ...

    def default_params(self) -> Any: ...


@dataclass(frozen=True)
class Child:
    new: NewCandidate
    proposal: Proposal | None = None  # the Optuna trial this child answers
    note: str = ""  # the LLM's rationale, shown to later prompts
    params_origin: str = ""  # an LLM child's PARAMS: kept, marked, restored (the parent's) or none
    operator: str = ""  # the registered operator that made it (set by the proposer, recorded by the loop)


class ProposalContext(Protocol):
    """What an operator may use: the run, the tuner, the families, the driver's RNG (seeded,
    saved with each child, so a resumed run draws on), and the proposer's duplicate check."""

    run: Run
    tuner: Tuner
    families: Mapping[str, KernelFamily]
    rng: random.Random
    retired: frozenset[str]  # structures an engineer retired: never tuned, never a parent
    tpe_max_inflight: int | None  # optuna.tpe_max_inflight: TPE gives way past this many children in flight

    def tuning_parent(self, family: str, island: int, inflight: Mapping[str, int]) -> Candidate | None: ...

    def select_parent(self, family: str, island: int) -> Candidate | None:
        """A parent by the selection rule (children in flight counted: ``selection.inflight_penalty``)."""
        ...

    def fresh(self, new: NewCandidate) -> bool:
        """True once per (source, params): a False child would repeat an existing candidate."""
        ...

    def untried(self, parent_source_sha256: str, params: Mapping[str, Any]) -> bool:
        """True once per (parent source, params): a False one was rendered and judged before (the
        same text would come out), so an operator need not render and hash it again."""
        ...

    def operator_state(self, operator: str, make: Callable[[], S]) -> S:
        """The operator's own memory for this search (``make()`` the first time): operators are
        module-level singletons, and what one learns of a run must not leak into another."""
        ...


@runtime_checkable
class Operator(Protocol):
    name: str  # its key in ``mutation:`` and what the store records for each child (operator/{cid})
    description: str  # one line for docs/config.md
    origin: Origin  # the lineage kind of its children (fixes their number of parents)
    needs_llm: bool  # True: an LLMOperator (asynchronous); False: an ImmediateOperator
    default_weight: float  # its weight when the config names no mix; 0: only when asked for


@runtime_checkable
class ImmediateOperator(Operator, Protocol):
    def propose(self, ctx: ProposalContext, family: str, island: int,
                inflight: Mapping[str, int]) -> Child | None:
        """A child of this family and island now, or None when there is nothing to offer.
        ``inflight`` counts the queued and running children per structure fingerprint."""
        ...


@runtime_checkable
class LLMOperator(Operator, Protocol):
    def parents(self, ctx: ProposalContext, parent: Candidate, island: int) -> tuple[Candidate, ...] | None:
        """The parents the prompt shows, starting from the selected ``parent``; None: this
        operator cannot work from it (the proposer tries the next one)."""
        ...

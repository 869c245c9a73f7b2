"""What an evaluation child and its parent say to each other.

The child writes one JSON object a line on its result pipe (never stdout, which the candidate
may print to), each one of the messages below, told apart by ``type``.  The parent writes plain
lines on the child's stdin: :data:`INIT` (a staged child may create its CUDA context), a job
file's path, and :data:`GO` (the answer to a turn asked or given back).

A child's life: ``loaded`` (staged children only), ``warm``; then per job ``ready``, a
``case_start`` and a ``case_result`` per case (``turn`` / ``turn_done`` around each timed region
of a job with turns), ``jit``, and ``done``; or ``fatal`` where the candidate never ran.
"""

from __future__ import annotations

import json
import typing
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from kernels.harness.results import CaseResult
from population.outcomes import CaseStatus

INIT = "init"
GO = "go"


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True)


class Loaded(_Message):
    """A staged child has imported torch and Triton and waits for :data:`INIT`."""

    type: Literal["loaded"] = "loaded"


class Warm(_Message):
    """The child has initialised the device and waits for a job."""

    type: Literal["warm"] = "warm"


class Ready(_Message):
    """The child has read a job and is about to load its candidate."""

    type: Literal["ready"] = "ready"
    device: str
    device_name: str
    versions: dict[str, str]
    pid: int


class Fatal(_Message):
    """The candidate (or the job's reference) never ran: every case of the job ends with this."""

    type: Literal["fatal"] = "fatal"
    status: CaseStatus = CaseStatus.ERROR
    error: str


class CaseStarted(_Message):
    """Case ``index`` of the job starts: its time limit runs from here."""

    type: Literal["case_start"] = "case_start"
    index: int


class CaseFinished(_Message):
    type: Literal["case_result"] = "case_result"
    index: int
    result: CaseResult


class JitCounts(_Message):
    """Triton compiles and cache hits during the job."""

    type: Literal["jit"] = "jit"
    compiled: int = 0
    cache_hits: int = 0


class TurnAsked(_Message):
    """The job wants the device alone for a timed region; it waits for :data:`GO`."""

    type: Literal["turn"] = "turn"


class TurnGivenBack(_Message):
    """The timed region is over; the child waits for :data:`GO` before it goes on."""

    type: Literal["turn_done"] = "turn_done"


class Done(_Message):
    """The job is over; ``reusable``: the child stays for another job."""

    type: Literal["done"] = "done"
    reusable: bool = False


class Unreadable(_Message):
    """A line on the result pipe that is none of the messages (not JSON, or of no known type)."""

    type: Literal["unreadable"] = "unreadable"
    line: str


ChildMessage = Union[Loaded, Warm, Ready, Fatal, CaseStarted, CaseFinished, JitCounts, TurnAsked, TurnGivenBack,
                     Done]
_MESSAGES: TypeAdapter[ChildMessage] = TypeAdapter(Annotated[ChildMessage, Field(discriminator="type")])
_KNOWN_TYPES = frozenset(model.model_fields["type"].default for model in typing.get_args(ChildMessage))


def encode(message: ChildMessage) -> bytes:
    """One line of the result pipe (as ``json``'s encoder writes it: NaN residuals stay NaN)."""
    return (json.dumps(message.model_dump(mode="json")) + "\n").encode()


def decode(line: bytes) -> ChildMessage | Unreadable:
    """The message a line holds.  A line that is not a message is :class:`Unreadable`; a message
    of a known type with a payload that does not fit raises pydantic's ValidationError."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError:
        raw = None
    if not isinstance(raw, dict) or raw.get("type") not in _KNOWN_TYPES:
        return Unreadable(line=line[:200].decode(errors="replace"))
    return _MESSAGES.validate_python(raw)

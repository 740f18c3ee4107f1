"""Running a stack of layers' read sides, and the second pass that gives what the budget's memory
room holds beyond the first pass to the layers that hit their cap (a layer's ``share`` is a cap,
not a reservation; see ``Memory``'s docstring for the whole budget).

Raw evidence before model-made facts: in the second pass a searching layer (retrieval) may also
take the room of the sections that ``pack`` would drop before its own (a higher ``priority``
number: the entity, profile and graph sections), which are read again smaller, or left out, to
make it. So a preset that adds model-backed layers to retrieval shows the same passages the plain
``window,retrieval`` stack shows for the question, and its facts only in the room those leave: a
wrong fact can sit beside the turns that contradict it, never take their place (issue 27).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from .layers.base import Layer, LayerOutput, ReadRequest
from .tokens import TokenCounter
from .types import Dropped, Message, Section

#: The memory sections' share of the budget when the conversation needs the rest; what the
#: conversation leaves unused goes to the memory sections as well.
SECTIONS_SHARE = 0.5
#: a second pass gives a capped layer the leftover only when at least this many tokens are left
_MIN_LEFTOVER = 8


@dataclass(frozen=True, slots=True)
class Step:
    """One layer's read: the conversation it was given and what it returned."""

    layer: Layer
    given: list[Message]
    out: LayerOutput


@dataclass(frozen=True, slots=True)
class Run:
    """The stack's reads in order, and the conversation the last one kept."""

    steps: list[Step]
    messages: list[Message]

    def output(self) -> LayerOutput:
        return LayerOutput(
            self.messages, [s for st in self.steps for s in st.out.sections], [d for st in self.steps for d in st.out.dropped]
        )


def pipeline(stack: list[Layer], request: ReadRequest, messages: list[Message]) -> Run:
    steps: list[Step] = []
    for layer in stack:
        out = layer.read(request, messages)
        steps.append(Step(layer, messages, out))
        messages = out.messages
    return Run(steps, messages)


def memory_room(available: int, conversation: int, counter: TokenCounter) -> int:
    """Tokens the memory sections may take (as ``pack`` counts them) out of ``available`` (the
    budget less the system messages and the query), beside a conversation of ``conversation``
    tokens: all the conversation leaves, and at least ``SECTIONS_SHARE`` of ``available``."""
    framing = counter.count_message(Message(role="system", content="x", id="memstack-memory")) - counter.count("x")
    return max(int(available * SECTIONS_SHARE), available - conversation - framing)


def _sections_cost(sections: Sequence[Section], counter: TokenCounter) -> int:
    """What ``pack`` counts for sections: their text and 4 tokens each."""
    return sum(counter.count(s.text) + 4 for s in sections)


def _steps_cost(steps: Sequence[Step], counter: TokenCounter) -> int:
    """What ``pack`` counts for every section of the steps."""
    return _sections_cost([s for st in steps for s in st.out.sections], counter)


def refill(run: Run, request: ReadRequest) -> Run:
    """The second pass: what the memory room holds beyond the first pass's sections goes to the
    layers that left something out (retrieval first, then in stack order), each read again on
    the conversation it was given with its cap raised by the leftover; the conversation the
    first pass kept stays. A layer's cap is ``share`` of the budget it is given (the contract of
    every layer with a ``share``), so the larger cap is passed as a larger budget."""
    if request.budget is None:
        return run
    counter = request.counter
    system = counter.count_messages(m for m in run.messages if m.role == "system")
    convo = counter.count_messages(m for m in run.messages if m.role != "system")
    room_all = memory_room(request.budget - system, convo, counter)
    steps = list(run.steps)
    left = room_all - _steps_cost(steps, counter)
    if left < 0:
        steps = _shrink(steps, request, left)
        left = room_all - _steps_cost(steps, counter)
    for i in _refill_order(steps):
        step = steps[i]
        yielding = _yielding(steps, i)
        room = left + sum(_sections_cost(steps[j].out.sections, counter) for j in yielding)
        if room < _MIN_LEFTOVER:
            continue
        share = float(step.layer.share)  # type: ignore[attr-defined]
        shown = sum(counter.count(s.text) for s in step.out.sections)
        cap = shown + room - (0 if step.out.sections else 4)  # a first section costs pack's 4 more
        if cap <= int(request.budget * share):
            continue  # no more room than the first pass had
        again = step.layer.read(replace(request, budget=_budget_for(cap, share)), step.given)
        gain = _sections_cost(again.sections, counter) - _sections_cost(step.out.sections, counter)
        if 0 < gain <= room:
            steps[i] = replace(step, out=LayerOutput(step.out.messages, again.sections, again.dropped))
            left -= gain
            if left < 0:  # the yielding sections make the room, smaller or left out
                steps = _shrink(steps, request, left, only=yielding)
                left = room_all - _steps_cost(steps, counter)
    return Run(steps, run.messages)


def _yielding(steps: Sequence[Step], i: int) -> list[int]:
    """The steps whose sections give way to step ``i``'s in the second pass: for a searching
    layer (the raw evidence), those whose every section ``pack`` would drop before its own."""
    step = steps[i]
    own = min((s.priority for s in step.out.sections), default=getattr(step.layer, "priority", None))
    if not hasattr(step.layer, "search") or own is None:
        return []
    return [j for j, st in enumerate(steps) if j != i and st.out.sections and min(s.priority for s in st.out.sections) > own]


def _shrink(steps: list[Step], request: ReadRequest, over: int, *, only: Sequence[int] | None = None) -> list[Step]:
    """When the layers' shares add up to more than the memory room (``over`` < 0 tokens left),
    the layers whose sections ``pack`` would drop first are read again with their cap lowered by
    what is over, so they keep what fits instead of losing their whole section; one with no room
    left loses its sections here (reported dropped), and what they cost is free again. ``only``:
    the steps that may give way (the others stay as they are)."""
    counter = request.counter
    steps = list(steps)
    order = sorted(
        (
            i
            for i, st in enumerate(steps)
            if st.out.sections and isinstance(getattr(st.layer, "share", None), (int, float)) and (only is None or i in only)
        ),
        key=lambda i: (max(s.priority for s in steps[i].out.sections), i),
        reverse=True,
    )
    for i in order:
        if over >= 0:
            break
        step = steps[i]
        cap = sum(counter.count(s.text) for s in step.out.sections) + over
        again = step.layer.read(replace(request, budget=_budget_for(cap, float(step.layer.share))), step.given) if cap > 0 else None  # type: ignore[attr-defined]
        if again is not None and again.sections:
            saved = _sections_cost(step.out.sections, counter) - _sections_cost(again.sections, counter)
            if saved > 0:
                steps[i] = replace(step, out=LayerOutput(step.out.messages, again.sections, again.dropped))
                over += saved
        else:  # nothing of it fits: it is left out here, and its room counts
            why = "memory section gave way to retrieved evidence" if only is not None else "memory section over its share of the budget"
            gone = [Dropped(s.name, why, s.source_ids, counter.count(s.text)) for s in step.out.sections]
            over += _sections_cost(step.out.sections, counter)
            steps[i] = replace(step, out=LayerOutput(step.out.messages, [], [*step.out.dropped, *gone]))
    return steps


def _refill_order(steps: Sequence[Step]) -> list[int]:
    """The layers to read again: those with a ``share`` that left something out; the searching
    ones (retrieval, topic) first."""
    capped = [
        i
        for i, st in enumerate(steps)
        if isinstance(getattr(st.layer, "share", None), (int, float)) and any(d.layer == st.layer.name for d in st.out.dropped)
    ]
    return sorted(capped, key=lambda i: (not hasattr(steps[i].layer, "search"), i))


def _budget_for(cap: int, share: float) -> int:
    """The largest budget whose ``share`` (as a layer takes it: ``int(budget * share)``) is at most ``cap``."""
    budget = int(cap / share)
    while int((budget + 1) * share) <= cap:
        budget += 1
    while budget > 0 and int(budget * share) > cap:
        budget -= 1
    return budget

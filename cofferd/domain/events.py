"""What happened in one part of the daemon that another part acts on, and the one hub
that carries it: producers are handed the hub when they are built and publish to it;
every subscriber is wired in one place, the composition root (surfaces.core._wire), so
following a save means reading that one function.

In the domain, not in application/: the hub is plain Python (no I/O, no loop of its
own), and the storage (infrastructure) publishes to it too (IndexDamaged), which may
import the domain but not the application.

Delivery is a plain call, in the producer's flow, at the moment it publishes: handlers run
one after the other in the order they subscribed, and what one raises reaches the producer
(the handlers after it are not called), as the callbacks it replaces did. `publish` is for
handlers that return nothing; `deliver` awaits handlers that are coroutines, in turn.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar


class Event:
    """What happened (a small frozen dataclass each)."""


@dataclass(frozen=True)
class DocumentsChanged(Event):
    """A pass added or changed documents of `kb` (their vectors are owed)."""

    kb: str


@dataclass(frozen=True)
class ConvertiblesAhead(Event):
    """A pass over `kb` is about to read files that are converted (their text may need
    converting: a converter may start while the pass prepares them)."""

    kb: str


@dataclass(frozen=True)
class UnconvertedFound(Event):
    """A document of `kb` at `relpath` has no text converted for its bytes (`digest`)."""

    kb: str
    relpath: str
    digest: str


@dataclass(frozen=True)
class Converted(Event):
    """The text of `relpath` in `kb` was converted (or why it cannot be was kept): the
    document is to be indexed again."""

    kb: str
    relpath: str


@dataclass(frozen=True)
class FullPassWanted(Event):
    """A change of `kb`'s settings asks for a pass over every document."""

    kb: str


@dataclass(frozen=True)
class LayoutChanged(Event):
    """A KB's folder came, went or was attached (its folders are to be watched afresh)."""


@dataclass(frozen=True)
class IndexDamaged(Event):
    """The index was found damaged, moved aside and replaced by an empty one."""

    reason: str


E = TypeVar("E", bound=Event)


class Events:
    """The hub: `subscribe(EventType, handler)`, then `publish(event)` or `await
    deliver(event)`. Handlers are found by the event's exact type."""

    def __init__(self) -> None:
        self._handlers: dict[type[Event], list[Callable[[Any], object]]] = {}

    def subscribe(self, kind: type[E], handler: Callable[[E], object]) -> None:
        self._handlers.setdefault(kind, []).append(handler)

    def publish(self, event: Event) -> None:
        """Call each handler of `event` now, in turn. A handler that returns something to
        await is a mistake here (it would never run): refused, loudly."""
        for handler in self._handlers.get(type(event), ()):
            outcome = handler(event)
            if inspect.isawaitable(outcome):
                if inspect.iscoroutine(outcome):
                    outcome.close()
                raise TypeError(f"{handler!r} is async: {type(event).__name__} is delivered")

    async def deliver(self, event: Event) -> None:
        """Call each handler of `event` in turn, awaiting those that are coroutines."""
        for handler in self._handlers.get(type(event), ()):
            outcome = handler(event)
            if inspect.isawaitable(outcome):
                await outcome

"""The events hub: what the services tell each other goes through it, to every subscriber
in the order they subscribed, at the moment it is published (the composition root wires
them: surfaces.core._wire)."""

from __future__ import annotations

import pytest

from cofferd.domain.events import (
    Converted,
    DocumentsChanged,
    Events,
    IndexDamaged,
    LayoutChanged,
)


def test_subscribers_are_told_in_order_at_once_and_only_of_their_kind() -> None:
    hub = Events()
    told: list[tuple[str, object]] = []
    hub.subscribe(DocumentsChanged, lambda e: told.append(("first", e)))
    hub.subscribe(Converted, lambda e: told.append(("converted", e)))
    hub.subscribe(DocumentsChanged, lambda e: told.append(("second", e)))
    hub.publish(DocumentsChanged("notes"))
    assert told == [("first", DocumentsChanged("notes")), ("second", DocumentsChanged("notes"))]
    hub.publish(Converted("notes", "a.pdf"))
    assert told[-1] == ("converted", Converted("notes", "a.pdf"))
    hub.publish(LayoutChanged())  # nobody listens: nothing happens
    assert len(told) == 3


def test_a_failing_subscriber_reaches_the_publisher() -> None:
    hub = Events()
    later: list[object] = []

    def fails(event: LayoutChanged) -> None:
        raise RuntimeError("broken subscriber")

    hub.subscribe(LayoutChanged, fails)
    hub.subscribe(LayoutChanged, later.append)
    with pytest.raises(RuntimeError, match="broken subscriber"):
        hub.publish(LayoutChanged())
    assert later == []  # as a callback that raised: its producer saw it, nothing after ran


async def test_async_subscribers_are_awaited_in_turn_and_refused_by_publish() -> None:
    hub = Events()
    told: list[str] = []

    async def first(event: IndexDamaged) -> None:
        told.append(f"first {event.reason}")

    hub.subscribe(IndexDamaged, first)
    hub.subscribe(IndexDamaged, lambda e: told.append("second"))
    await hub.deliver(IndexDamaged("damaged"))
    assert told == ["first damaged", "second"]
    with pytest.raises(TypeError):
        hub.publish(IndexDamaged("never awaited"))  # would be lost: refused

"""A folder that does not answer (a dead network mount) never holds the daemon up."""

from __future__ import annotations

import asyncio
import threading
import time

from cofferd.infrastructure.files.probe import FsProbe


async def test_a_look_that_hangs_answers_not_known_and_holds_nothing_up() -> None:
    probe = FsProbe("test", timeout_s=0.2)
    release = threading.Event()
    started = time.monotonic()
    assert await probe(lambda: release.wait(30)) is None  # timed out
    assert probe.stuck and time.monotonic() - started < 5
    assert await probe(lambda: "second") is None  # the first still hangs: no second thread
    release.set()
    for _ in range(100):
        if (answer := await probe(lambda: "there")) is not None:
            break
        await asyncio.sleep(0.02)
    assert answer == "there" and not probe.stuck


async def test_a_look_that_fails_answers_not_known() -> None:
    def fails() -> bool:
        raise PermissionError("no")

    assert await FsProbe("test")(fails) is None

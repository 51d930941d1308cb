"""The fixture the language server's tests share: one `cofferctl lsp` per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.daemon import Daemon
from tests.support.lsp_pipe import RawClient


@pytest.fixture(scope="module")
def lsp_client(shared_daemon: Daemon) -> Iterator[RawClient]:
    """A `cofferctl lsp` on pipes, talking to the module's shared daemon."""
    started = RawClient(shared_daemon.env()).start()
    try:
        yield started
    finally:
        started.kill()

"""The fixture the MCP tests share: `cofferctl mcp` processes on pipes, closed at the end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.mcp_fuzzing import INITIALIZE, McpPipe


@pytest.fixture
def mcp(tmp_path: Path) -> Iterator[Callable[..., McpPipe]]:
    """Start `cofferctl mcp` processes (initialized unless asked not to)."""
    started: list[McpPipe] = []

    def start(socket: Path, *, initialize: bool = True) -> McpPipe:
        pipe = McpPipe(socket, tmp_path / f"mcp-{len(started)}.log")
        started.append(pipe)
        if initialize:
            assert "result" in pipe.call("init", "initialize", INITIALIZE)
            pipe.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        return pipe

    yield start
    for pipe in started:
        pipe.close(timeout=30)

"""Issue 6 figure: time for an MCP client to spawn `cofferctl mcp`, initialize and complete
one search against a running cofferd (median of 10).

    .venv/bin/python -m bench.mcp_roundtrip
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

from bench.common import machine, median, scratch_home
from cofferctl.client import Client as CofferClient
from cofferctl.client import DaemonUnreachable

BIN = Path(sys.executable).parent


async def once(socket_path: Path) -> float:
    params = StdioServerParameters(
        command=str(BIN / "cofferctl"), args=["mcp"], env={"COFFER_SOCKET": str(socket_path)}
    )
    started = time.perf_counter()
    async with Client(params) as client:
        result = await client.call_tool("search", {"query": "bread"})
        assert not result.is_error
    return (time.perf_counter() - started) * 1000


def main() -> None:
    home = scratch_home("mcp")
    socket_path = Path(f"/tmp/coffer-bench-mcp-{os.getpid()}.sock")
    docs = home / "knowledge" / "notes" / "docs"
    docs.mkdir(parents=True)
    (docs / "lunch.md").write_text("# Lunch\n\nBread and soup.\n")
    env = {**os.environ, "COFFER_HOME": str(home), "COFFER_SOCKET": str(socket_path)}
    daemon = subprocess.Popen([str(BIN / "cofferd"), "--log-level", "WARNING"], env=env)
    try:
        client = CofferClient(socket_path)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if client.get("/api/v1/status")["startup_reconcile_done"]:
                    break
            except DaemonUnreachable:
                pass
            time.sleep(0.05)
        times = [asyncio.run(once(socket_path)) for _ in range(10)]
    finally:
        daemon.terminate()
        daemon.wait(30)
    print(f"machine: {machine()}")
    print(
        f"MCP spawn + initialize + one search: median {median(times):.0f} ms "
        f"(min {min(times):.0f}, max {max(times):.0f}) over {len(times)} runs"
    )


if __name__ == "__main__":
    main()

"""Issue 6 and 15 figures: how fast `cofferctl mcp` answers a client that spawns it.

Against a running cofferd, each round spawns `cofferctl mcp` and measures, with the real
`mcp` stdio client, (a) spawn to the first `tools/list` answer and (b) spawn, initialize,
one search and close; and, speaking JSON-RPC over the pipes directly (no client
library), (c) spawn to the first `tools/list` answer. `--old PATH` measures a frozen
checkout too, in the same run, rounds alternated:

    git worktree add /tmp/mcp-old 8f2b2f7
    .venv/bin/python -m bench.studies.mcp_roundtrip --old /tmp/mcp-old
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

from bench.common import REPO, machine, median, scratch_home
from cofferctl.client import Client as CofferClient
from cofferctl.client import DaemonUnreachable
from tests.support.cofferd_process import start_cofferd

BIN = Path(sys.executable).parent
ROUNDS = 15
SEARCH = {"kb": "notes", "query": "bread"}
HANDSHAKE = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]  # fmt: skip


def server_env(socket_path: Path, checkout: Path) -> dict[str, str]:
    return {**os.environ, "COFFER_SOCKET": str(socket_path), "PYTHONPATH": str(checkout)}


async def with_client(socket_path: Path, checkout: Path) -> tuple[float, float]:
    """(spawn to tools/list answered, spawn to closed after one search) in ms."""
    params = StdioServerParameters(
        command=str(BIN / "cofferctl"), args=["mcp"], env=server_env(socket_path, checkout)
    )
    started = time.perf_counter()
    async with Client(params) as client:
        await client.list_tools()
        listed = time.perf_counter()
        result = await client.call_tool("search", SEARCH)
        assert not result.is_error, result.content
    return (listed - started) * 1000, (time.perf_counter() - started) * 1000


def over_pipes(socket_path: Path, checkout: Path) -> float:
    """Spawn to the tools/list answer in ms, JSON-RPC written and read directly."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [str(BIN / "cofferctl"), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env=server_env(socket_path, checkout),
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in HANDSHAKE))
    proc.stdin.flush()
    while json.loads(proc.stdout.readline()).get("id") != 2:
        pass
    elapsed = (time.perf_counter() - started) * 1000
    proc.stdin.close()
    proc.wait(30)
    return elapsed


def start_daemon(home: Path, socket_path: Path) -> subprocess.Popen[bytes]:
    docs = home / "knowledge" / "notes" / "docs"
    docs.mkdir(parents=True)
    (docs / "lunch.md").write_text("# Lunch\n\nBread and soup.\n")
    env = {**os.environ, "COFFER_HOME": str(home), "COFFER_SOCKET": str(socket_path)}
    daemon = start_cofferd(env, log_level="WARNING")
    client = CofferClient(socket_path)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if client.get("/api/v1/status")["startup_reconcile_done"]:
                return daemon
        except DaemonUnreachable:
            pass
        time.sleep(0.05)
    daemon.terminate()
    raise SystemExit("cofferd did not become ready within 30 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, help="a checkout of the code to compare with")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    a = parser.parse_args()
    checkouts = {"this checkout": REPO}
    if a.old:
        checkouts["old (" + str(a.old) + ")"] = a.old.resolve()
    socket_path = Path(f"/tmp/coffer-bench-mcp-{os.getpid()}.sock")
    daemon = start_daemon(scratch_home("mcp"), socket_path)
    times: dict[str, dict[str, list[float]]] = {
        name: {"list": [], "search": [], "pipes": []} for name in checkouts
    }
    try:
        for _ in range(a.rounds):
            for name, checkout in checkouts.items():
                listed, searched = asyncio.run(with_client(socket_path, checkout))
                times[name]["list"].append(listed)
                times[name]["search"].append(searched)
                times[name]["pipes"].append(over_pipes(socket_path, checkout))
    finally:
        daemon.terminate()
        daemon.wait(30)
    print(f"machine: {machine()}; {a.rounds} rounds, alternated")
    labels = {
        "list": "spawn -> first tools/list answer (mcp client)",
        "pipes": "spawn -> first tools/list answer (raw JSON-RPC over the pipes)",
        "search": "spawn + initialize + one search + close (mcp client)",
    }
    for name, measured in times.items():
        print(name)
        for key, label in labels.items():
            values = measured[key]
            print(f"  {label}: median {median(values):.0f} ms "
                  f"(min {min(values):.0f}, max {max(values):.0f})")  # fmt: skip


if __name__ == "__main__":
    main()

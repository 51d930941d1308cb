"""Interoperability: the MCP Inspector's CLI (TypeScript SDK, another ecosystem) lists the
tools of `cofferctl mcp` and calls one against a real daemon. Skipped, with the reason,
where `npx` is absent or the Inspector cannot be installed."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from tests.support.daemon import BIN, Daemon, wait_for
from tests.support.mcp_client import PYTHONPATH, new_kb

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
INSTALL_S = 240  # the first run downloads the package; later ones use npm's cache
CALL_S = 60


def inspector(*args: str, timeout: float = CALL_S) -> subprocess.CompletedProcess[str]:
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed: the MCP Inspector cannot run here")
    return subprocess.run(
        [npx, "-y", INSPECTOR, "--cli", *args],
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture(scope="module")
def installed() -> None:
    try:
        probe = inspector("--help", timeout=INSTALL_S)
    except subprocess.TimeoutExpired:
        pytest.skip(f"installing {INSPECTOR} took over {INSTALL_S} s")
    if probe.returncode != 0:
        pytest.skip(f"{INSPECTOR} cannot be installed: {probe.stderr.strip()[-300:]}")


def server(d: Daemon) -> list[str]:
    env = {"COFFER_SOCKET": str(d.socket), **PYTHONPATH}
    return [*(a for k, v in env.items() for a in ("-e", f"{k}={v}")), str(BIN / "cofferctl"), "mcp"]


def answer(run: subprocess.CompletedProcess[str]) -> Any:
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_the_inspector_lists_and_calls_tools(installed: None, shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d, "insp")
    d.docs(kb).mkdir(parents=True, exist_ok=True)
    d.docs(kb).joinpath("soup.md").write_text("# Soup\n\nLentil soup with cumin.\n")
    wait_for(lambda: d.client.get(d.client.kb(kb, "/metrics"))["documents"] == 1)

    tools = answer(inspector(*server(d), "--method", "tools/list"))["tools"]
    search = next(t for t in tools if t["name"] == "search")
    assert search["inputSchema"]["additionalProperties"] is False
    assert search["annotations"]["readOnlyHint"] is True

    called = answer(inspector(*server(d), "--method", "tools/call", "--tool-name", "search",
                              "--tool-arg", f"kb={kb}", "--tool-arg", "query=lentil"))  # fmt: skip
    assert called.get("isError") is not True, called
    assert called["structuredContent"]["passages"][0]["relative_path"] == "soup.md"

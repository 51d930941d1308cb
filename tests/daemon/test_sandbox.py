"""The shipped service's sandbox (ProtectSystem=strict, PrivateTmp) with attached folders
and files added from /tmp. The unit is generated as `cofferctl service install` writes it
and its file-system settings are applied with a mount namespace (tests/support/sandbox.py), since
this machine has no user systemd to run it (`systemd-analyze verify` checks the unit)."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from coffer_kernel.locations import Locations
from cofferctl import cli
from cofferctl import service_units as service
from cofferctl.client import ApiError
from cofferd.infrastructure.files.confinement import Boundary
from cofferd.infrastructure.files.kb_folders import KBFiles
from tests.support.cofferd_process import start_cofferd
from tests.support.daemon import BIN, REPO, ContractClient, wait_for
from tests.support.helpers import write


def _can_unshare() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return probe.returncode == 0


def _under_private_tmp(path: Path) -> bool:
    return any(path.resolve().is_relative_to(tmp) for tmp in ("/tmp", "/var/tmp"))


pytestmark = [
    pytest.mark.skipif(
        not _can_unshare(), reason="needs root and mount namespaces to emulate the sandbox"
    ),
    pytest.mark.skipif(
        _under_private_tmp(BIN),
        reason="this checkout is under /tmp, which PrivateTmp hides from the service itself",
    ),
]


@pytest.fixture
def place() -> Iterator[Path]:
    """Outside /tmp, which the sandbox replaces (the daemon must still see its data)."""
    base = Path(tempfile.mkdtemp(prefix="coffer-sandbox-", dir=Path.home()))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_attached_folders_and_tmp_files_under_the_service_sandbox(place: Path) -> None:
    home, vault, other = place / "home", place / "vault", place / "elsewhere"
    write(vault / "plan.md", "# Plan\n\nThe ibis project.")
    write(other / "note.md", "# Note\n\nAn ibis elsewhere.")
    home.mkdir()
    socket_path = home / "s.sock"
    # the data home as `kb create --path` leaves it, before the service is (re)written
    locations = Locations(home, socket_path)
    (home / "knowledge/vault").mkdir(parents=True)
    KBFiles(locations, Boundary(locations)).attach("vault", vault)  # link and identity
    unit = place / "cofferd.service"
    unit.write_text(
        service.systemd_service(
            str(BIN / "cofferd"), home, socket_path, locations.attached_folders()
        )
    )
    assert f"ReadWritePaths=-{vault}\n" in unit.read_text()
    env = {**os.environ, "COFFER_HOME": str(home), "COFFER_SOCKET": str(socket_path)}
    proc = start_cofferd(
        env, log_level=None,
        under=["unshare", "-m", "--propagation", "private", sys.executable,
               str(REPO / "tests/support/sandbox.py"), str(unit), str(place / "private"), "--"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    client = ContractClient(socket_path, timeout=60)
    try:
        wait_for(lambda: client.get("/api/v1/health"), timeout=30)
        client.post("/api/v1/knowledge_bases", {"name": "other", "path": str(other)})

        def found(kb: str) -> list[str]:
            reply = client.post(client.kb(kb, "/search"), {"query": "ibis"})
            return [p["relative_path"] for p in reply["passages"]]

        wait_for(lambda: found("vault") == ["plan.md"] and found("other") == ["note.md"])

        # the unit lists the attached folder: edits land there
        client.request(
            "PUT", client.kb("vault", "/documents/plan.md"), {"content": "An ibis, edited."}
        )
        assert "edited" in (vault / "plan.md").read_text()
        # a folder attached after the unit was written is read-only until `refresh`
        with pytest.raises(ApiError) as err:
            client.request("PUT", client.kb("other", "/documents/note.md"), {"content": "x"})
        assert err.value.code == "STORAGE_ERROR" and "ead-only" in err.value.message
        assert (other / "note.md").read_text() != "x"
        assert str(other) in [str(p) for p in locations.attached_folders()]  # what refresh lists

        # a file in the user's /tmp reaches the daemon, whose /tmp is its own
        with tempfile.TemporaryDirectory() as tmp:
            page = Path(tmp) / "report.html"
            page.write_text("<h1>Report</h1><p>the ibis census</p>")
            out = io.StringIO()
            code = cli.main(["--socket", str(socket_path), "add", "vault", str(page)], stdout=out)
            assert code == 0 and "1 added" in out.getvalue()
            report = client.post(client.kb("vault", "/check-sources"))
        assert [e["source_path"] for e in report["unreachable"]] == [str(page)]
        assert "private /tmp" in report["unreachable"][0]["note"] and not report["missing"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)

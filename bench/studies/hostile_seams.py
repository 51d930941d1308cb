"""Issue 33: hostile input at the seams, against a real cofferd (and `cofferctl mcp`): for
each case, how long the slowest `/health` answer took while it ran, what became of it, and,
over the whole run, every file the daemon and its workers wrote outside the data home.

Cases: a YAML alias bomb as a synced KB's kb.yaml and as a note's frontmatter; 20,000
wildcard ignore patterns (then changed) and 100,000 lines of them; a note that is one
12 MB line, then grep; a 2,000-character CJK query over every KB; a zip named x.pdf that
inflates to 150 MB of text; a PDF whose /Title refers to itself; 40 nested zips; a
UTF-16 text file; a derived text edited by hand and one replaced by a FIFO; derived/ and
incoming/ as links; MCP lines with an object id and of 50 MB.

The daemon runs under `strace -f` (every process it starts too) when strace is there: each
open for writing, creation, rename, link and removal is checked to be inside the data home
or the runtime folder of the socket; anything else is listed. Latencies are those of that
run (strace slows every system call: `--no-strace` for plain figures).

    .venv/bin/python -m bench.studies.hostile_seams [--repo PATH] [--no-strace]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import BIN, add_repo_argument, code_env, describe_code, machine, wait
from cofferctl import api as ctl_api
from cofferctl.client import ApiError, Client
from tests.support.cofferd_process import start_cofferd
from tests.support.hostile_documents import nested_zips, self_titled_pdf, zip_named_pdf

HEALTH_EVERY_S = 0.01


class Prober:
    """Asks for /health every 10 ms in a thread; keeps the slowest answer of each case."""

    def __init__(self, socket: Path) -> None:
        self.client = Client(socket, actor="prober", timeout=120)
        self.worst = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            with contextlib.suppress(ApiError, OSError):
                self.client.get("/api/v1/health")
            self.worst = max(self.worst, time.monotonic() - started)
            time.sleep(HEALTH_EVERY_S)

    def take(self) -> float:
        worst, self.worst = self.worst, 0.0
        return worst * 1000

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


# -- hostile files ---------------------------------------------------------------------


def alias_bomb(levels: int = 9) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, levels):
        prev, name = chr(ord("a") + n - 1), chr(ord("a") + n)
        lines.append(f"{name}: &{name} [{','.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


# -- the run ---------------------------------------------------------------------------


class Run:
    def __init__(self, repo: Path, root: Path, use_strace: bool) -> None:
        self.root = root
        self.home = root / "home"
        self.socket = root / "run" / "cofferd.sock"
        self.outside = root / "outside"
        self.outside.mkdir(parents=True)
        self.trace = root / "trace"
        env = code_env(repo, COFFER_HOME=str(self.home), COFFER_SOCKET=str(self.socket))
        under: list[str] = []
        if use_strace:
            under = [
                "strace", "-f", "-qq", "-o", str(self.trace), "-e",
                "trace=open,openat,creat,mkdir,mkdirat,rename,renameat,renameat2,link,"
                "linkat,symlink,symlinkat,unlink,unlinkat,rmdir,truncate",
            ]  # fmt: skip
        self.env = env
        self.daemon = start_cofferd(env, log_level="WARNING", under=under)
        self.client = Client(self.socket, actor="bench", timeout=300)
        wait(lambda: self.client.get("/api/v1/health"), self.daemon, 120, 0.1)
        self.prober = Prober(self.socket)
        self.rows: list[tuple[str, float, float, str]] = []

    def case(self, name: str, run: Callable[[], str]) -> None:
        self.prober.take()
        started = time.monotonic()
        try:
            outcome = run()
        except Exception as exc:  # noqa: BLE001 - a bench reports what failed and goes on
            outcome = f"FAILED: {type(exc).__name__}: {exc}"[:200]
        seconds = time.monotonic() - started
        self.rows.append((name, self.prober.take(), seconds, outcome))
        print(f"{name}: health max {self.rows[-1][1]:.1f} ms, {seconds:.1f} s: {outcome}")

    def kb(self, name: str, formats: list[str] | None = None) -> Path:
        config: dict[str, Any] = {}
        if formats is not None:
            config["index_formats"] = formats
        self.client.post("/api/v1/knowledge_bases", {"name": name, "config": config})
        return self.home / "knowledge" / name / "docs"

    def until(self, condition: Callable[[], Any], timeout: float = 120) -> Any:
        return wait(condition, self.daemon, timeout, 0.05)

    def skipped(self, kb: str) -> dict[str, str]:
        items = ctl_api.skipped(self.client, kb)["items"]
        return {i["relative_path"]: i["reason"] for i in items}

    def documents(self, kb: str) -> set[str]:
        reply = self.client.get(f"/api/v1/knowledge_bases/{kb}/documents", limit=500)
        return {d["relative_path"] for d in reply["documents"]}

    def paths(self, kb: str, query: str) -> list[str]:
        reply = self.client.post(
            f"/api/v1/knowledge_bases/{kb}/search", {"query": query, "top_k": 50}
        )
        return sorted({p["relative_path"] for p in reply["passages"]})

    def stop(self) -> None:
        self.prober.stop()
        try:  # under strace, SIGTERM to strace only detaches it: cofferd is told itself
            os.kill(int(self.client.get("/api/v1/status")["pid"]), signal.SIGTERM)
        except (ApiError, OSError, KeyError, ValueError):
            self.daemon.terminate()
        try:
            self.daemon.wait(60)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()


def cases(r: Run) -> None:
    docs = r.kb("plain")
    for n in range(200):
        (docs / f"n{n}.md").write_text(f"# Note {n}\n\nordinary words and cedar {n}\n")
    r.until(lambda: len(r.paths("plain", "cedar")) == 50)

    def synced_alias_bomb() -> str:
        folder = r.home / "knowledge" / "synced"
        (folder / "docs").mkdir(parents=True)
        (folder / "docs" / "a.md").write_text("# A\n\nsynced words\n")
        (folder / "kb.yaml").write_text(alias_bomb())

        def said() -> str | None:
            status = r.client.get("/api/v1/status")
            for k in status["knowledge_bases"]:
                if k["name"] == "synced" and (k.get("settings_error") or k["problems"]):
                    return str(k.get("settings_error") or k["problems"])
            refused = [f for f in status.get("refused_folders", []) if "synced" in str(f)]
            return str(refused) if refused else None

        return str(r.until(said, 120))[:120]

    r.case("kb.yaml alias bomb (synced)", synced_alias_bomb)

    def frontmatter_bomb() -> str:
        (docs / "bomb.md").write_text("---\n" + alias_bomb() + "---\n\nbomb body words\n")
        r.until(lambda: "bomb.md" in r.skipped("plain") or r.paths("plain", "bomb"), 60)
        return r.skipped("plain").get("bomb.md", "indexed")[:120]

    r.case("frontmatter alias bomb", frontmatter_bomb)

    (docs / "secret.md").write_text("# Secret\n\nmarmot hidden\n")
    (docs / "secret-kept.md").write_text("# Kept\n\nmarmot kept\n")
    r.until(lambda: r.paths("plain", "marmot") == ["secret-kept.md", "secret.md"])

    def ignore_patterns(count: int, taken: str, kept: str) -> Callable[[], str]:
        """An ignore file whose first rules ignore `taken` and take `kept` back, then
        `count` wildcard lines; the time until search follows them, then a reindex."""

        def run() -> str:
            wildcards = "".join(f"*zz{n}{taken}*q\n" for n in range(count))
            started = time.monotonic()
            (docs / ".gitignore").write_text(f"secret*.md\n!{kept}\n{wildcards}")
            r.until(lambda: r.paths("plain", "marmot") == [kept], 300)
            applied = time.monotonic() - started
            started = time.monotonic()
            r.client.post("/api/v1/knowledge_bases/plain/reindex")
            reindexed = time.monotonic() - started
            said = r.skipped("plain").get(".gitignore", "nothing said")[:60]
            return f"applied in {applied:.1f} s, reindex {reindexed:.1f} s; {said}"

        return run

    r.case("20,000 ignore patterns", ignore_patterns(20_000, "secret.md", "secret-kept.md"))
    r.case(
        "20,000 ignore patterns, changed", ignore_patterns(20_000, "secret-kept.md", "secret.md")
    )
    r.case("100,000 ignore lines", ignore_patterns(100_000, "secret.md", "secret-kept.md"))
    (docs / ".gitignore").unlink()

    def one_line_note() -> str:
        (docs / "datauri.md").write_text("![x](data:image/png;base64," + "QUJD" * 3_000_000 + ")")
        (docs / "hit.md").write_text("# Hit\n\nneedleword here\n")
        r.until(lambda: r.paths("plain", "needleword") == ["hit.md"], 60)
        reply = r.client.post("/api/v1/knowledge_bases/plain/grep", {"pattern": "needleword|QUJD"})
        found = sorted({h["relative_path"] for h in reply["hits"]})
        return f"grep answered {found}"

    r.case("one 12 MB line, grep", one_line_note)

    def long_cjk_query() -> str:
        query = ("東京大学の研究者が新しい発見をした" * 120)[:2000]
        started = time.monotonic()
        reply = r.client.post("/api/v1/search", {"query": query, "top_k": 10})
        said = {k: v for k, v in reply.items() if k not in ("passages",)}
        return f"{time.monotonic() - started:.2f} s; {json.dumps(said, ensure_ascii=False)[:100]}"

    r.case("2,000-character CJK query", long_cjk_query)

    files = r.kb("files", ["pdf", "docx", "txt"])

    def converted(name: str, data: bytes, timeout: float = 180) -> Callable[[], str]:
        """Writes the file and waits until it is indexed or skipped with a reason."""

        def run() -> str:
            (files / name).write_bytes(data)

            def settled() -> str | None:
                reason = r.skipped("files").get(name)
                if reason:
                    return f"skipped: {reason}"
                return "indexed" if name in r.documents("files") else None

            return str(r.until(settled, timeout))[:120]

        return run

    r.case("zip named x.pdf (150 MB inside)", converted("x.pdf", zip_named_pdf()))
    r.case("PDF whose /Title refers to itself", converted("loop.pdf", self_titled_pdf()))
    r.case("40 nested zips as .docx", converted("nested.docx", nested_zips()))

    def utf16_text() -> str:
        (files / "wide.txt").write_bytes("\ufeffwidetoken in UTF-16\n".encode("utf-16-le"))
        r.until(lambda: r.paths("files", "widetoken") or r.skipped("files").get("wide.txt"), 60)
        return str(r.paths("files", "widetoken") or r.skipped("files").get("wide.txt"))

    r.case("UTF-16 .txt with a BOM", utf16_text)

    def data_home_links() -> str:
        derived = r.home / "derived"
        aside = r.home / "derived.aside"
        planted = r.outside / "planted"
        planted.mkdir()
        if derived.exists():
            derived.rename(aside)
        derived.symlink_to(planted)
        r.client.post("/api/v1/knowledge_bases/files/reindex")
        status = r.client.get("/api/v1/status")
        derived.unlink()
        if aside.exists():
            aside.rename(derived)
        return f"status problems: {json.dumps(status.get('problems'))[:100]}"

    r.case("derived/ as a link", data_home_links)

    r.until(lambda: r.client.get("/api/v1/status"), 10)


def mcp_cases(r: Run) -> None:
    def lines(payloads: list[bytes]) -> str:
        proc = subprocess.Popen(
            [str(BIN / "cofferctl"), "mcp"], env={**r.env}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            out, _ = proc.communicate(b"".join(p + b"\n" for p in payloads), timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            return "no answer in 120 s"
        answers = [json.loads(line) for line in out.splitlines() if line.strip()]
        return f"{len(answers)} answers to {len(payloads)} lines: " + ", ".join(
            str(a.get("error", {}).get("code", "ok")) for a in answers
        )

    r.case(
        "MCP id that is an object",
        lambda: lines([b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}']),
    )
    big = b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"pad":"' + b"x" * 50_000_000 + b'"}}'
    r.case("MCP line of 50 MB", lambda: lines([big, b'{"jsonrpc":"2.0","id":8,"method":"ping"}']))


WRITES = re.compile(
    r"^(\d+)\s+(open|openat|creat|mkdir|mkdirat|rename|renameat2?|link|linkat|symlink|"
    r"symlinkat|unlink|unlinkat|rmdir|truncate)\((.*)\)\s+=\s+(-?\d+)"
)
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def outside_writes(r: Run) -> dict[str, int]:
    """Folders outside the data home and the socket's folder that got a write, with counts."""
    if not r.trace.exists():
        return {}
    allowed = [str(r.home), str(r.socket.parent), "/dev/", "/proc/"]
    found: dict[str, int] = {}
    for line in r.trace.read_text(errors="replace").splitlines():
        m = WRITES.match(line)
        if not m or int(m.group(4)) < 0:
            continue
        call, args = m.group(2), m.group(3)
        if call in ("open", "openat") and not re.search(r"O_WRONLY|O_RDWR|O_CREAT", args):
            continue
        for path in QUOTED.findall(args):
            if not path.startswith("/") or "__pycache__" in path:
                continue
            if not any(path.startswith(a) for a in allowed):
                folder = os.path.dirname(path)
                found[folder] = found.get(folder, 0) + 1
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_repo_argument(parser)
    parser.add_argument("--no-strace", action="store_true")
    args = parser.parse_args()
    use_strace = not args.no_strace and shutil.which("strace") is not None
    root = Path(tempfile.mkdtemp(prefix="coffer-hostile-"))
    print(f"{describe_code(args.repo)}; {machine()}; strace: {use_strace}")
    r = Run(args.repo, root, use_strace)
    try:
        cases(r)
        mcp_cases(r)
    finally:
        r.stop()
    print("\n| case | /health max (ms) | s | outcome |\n|---|---|---|---|")
    for name, worst, seconds, outcome in r.rows:
        print(f"| {name} | {worst:.1f} | {seconds:.1f} | {outcome} |")
    writes = outside_writes(r)
    print(f"\nwrites outside the data home: {sum(writes.values())}")
    for folder, count in sorted(writes.items(), key=lambda kv: -kv[1])[:20]:
        print(f"  {count:6d}  {folder}")
    shutil.rmtree(root, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()

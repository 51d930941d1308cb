"""Grep over one knowledge base's docs/ with ripgrep (no index): bounded in matches and time.

Hits come in a stable order, by relative path and then line: rg walks the tree sorted
(`--sort path`, so that a truncated answer is the same first matches every time), and the
hits are sorted once more, as rg sorts by folder, not by the whole path."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import sysconfig
from collections.abc import Callable
from pathlib import Path

from cofferd.domain.errors import EngineUnavailable, InvalidPattern, StorageError
from cofferd.domain.ports import RawHit
from cofferd.infrastructure.document_policy import DocumentPolicy
from cofferd.locations import Locations, normalize_relpath

TIMEOUT_S = 5.0
MAX_LINE_CHARS = 500
BATCH_LINES = 256  # rg's lines parsed at once, off the loop
BATCH_BYTES = 1024 * 1024


def find_rg() -> str | None:
    """The `rg` installed beside this interpreter (the `ripgrep` wheel), else one on PATH.

    Services start with a minimal PATH, so the venv's own copy comes first."""
    beside = Path(sysconfig.get_path("scripts")) / "rg"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("rg")


class Ripgrep:
    def __init__(
        self, locations: Locations, policy: DocumentPolicy, timeout_s: float = TIMEOUT_S
    ) -> None:
        self.locations = locations
        self.policy = policy
        self.timeout_s = timeout_s
        self.binary = find_rg()

    async def grep(
        self, kb: str, pattern: str, max_matches: int, ignore_case: bool = False
    ) -> tuple[list[RawHit], bool]:
        if self.binary is None:
            raise EngineUnavailable("ripgrep (rg) is not installed", engine="ripgrep")
        docs = self.policy.boundary.root(kb)
        if not os.access(docs, os.R_OK | os.X_OK):
            folder = self.locations.docs_folder(kb)  # as people know it, not resolved
            raise StorageError(f"the docs folder {folder} cannot be read", path=str(folder))
        args = [
            self.binary, "--json", "--no-config", "--no-ignore", "--no-messages", "--sort=path",
            *self.policy.ripgrep_args(), *(["--ignore-case"] if ignore_case else []),
            "-e", pattern, "--", ".",
        ]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            *args,
            cwd=docs,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=8 * 1024 * 1024,
        )
        hits: list[RawHit] = []
        truncated = False
        try:
            async with asyncio.timeout(self.timeout_s):
                truncated = await _collect(
                    proc, hits, max_matches, lambda path: self.policy.is_document(kb, path)
                )
                if truncated:  # enough: do not wait for rg to scan the rest
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                stderr = await proc.stderr.read() if proc.stderr else b""
                code = await proc.wait()
        except TimeoutError:
            truncated = True
            code = 0
            stderr = b""
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if code == 2 and not hits and not truncated:
            message = stderr.decode(errors="replace").strip() or "ripgrep failed"
            raise InvalidPattern(f"invalid pattern: {message}", field="pattern")
        hits.sort(key=lambda hit: (hit.path, hit.line_number))
        return hits, truncated


async def _collect(
    proc: asyncio.subprocess.Process,
    hits: list[RawHit],
    limit: int,
    is_document: Callable[[str], bool],
) -> bool:
    """Read rg's JSON lines into `hits` (documents only); True when more matches exist
    than `limit`. Lines are parsed and judged in batches off the serving loop: one can be
    megabytes long, and judging a path may read an ignore file."""
    batch: list[bytes] = []
    held = 0
    async for raw in proc.stdout:  # type: ignore[union-attr]
        batch.append(raw)
        held += len(raw)
        if len(batch) >= BATCH_LINES or held >= BATCH_BYTES:
            hits += await asyncio.to_thread(_matches, batch, is_document)
            batch, held = [], 0
            if len(hits) > limit:
                del hits[limit:]
                return True
    hits += await asyncio.to_thread(_matches, batch, is_document)
    if len(hits) > limit:
        del hits[limit:]
        return True
    return False


def _matches(lines: list[bytes], is_document: Callable[[str], bool]) -> list[RawHit]:
    found = []
    for raw in lines:
        event = json.loads(raw)
        if event.get("type") != "match":
            continue
        data = event["data"]
        path = _text(data["path"])
        path = normalize_relpath(path[2:] if path.startswith("./") else path)
        if is_document(path):
            line = _text(data["lines"]).rstrip("\n")
            found.append(RawHit(path, int(data["line_number"]), line[:MAX_LINE_CHARS]))
    return found


def _text(field: dict[str, str]) -> str:
    if "text" in field:
        return field["text"]
    return base64.b64decode(field.get("bytes", "")).decode("utf-8", errors="replace")

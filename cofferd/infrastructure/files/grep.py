"""Grep over one knowledge base's docs/ with ripgrep (no index), and over the text converted
from its documents in other formats: bounded in matches and time. A hit in a converted
PDF (slide deck, workbook) says its page (slide, sheet) and its line within that page.

Hits come in a stable order, by relative path and then line: rg walks the tree sorted
(`--sort path`, so that a truncated answer is the same first matches every time), and the
hits are sorted once more, as rg sorts by folder, not by the whole path."""

from __future__ import annotations

import asyncio
import mmap
import os
import shutil
import sysconfig
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from coffer_kernel.locations import CONVERTED_TEXT, Locations, normalize_relpath
from cofferd.domain.errors import EngineUnavailable, InvalidPattern, StorageError
from cofferd.domain.file_records import RawHit
from cofferd.domain.pages import PageStart, line_in_page, page_of, page_starts_in
from cofferd.infrastructure import child_processes
from cofferd.infrastructure.files.confinement import home_folder_problem
from cofferd.infrastructure.files.document_policy import DocumentPolicy

TIMEOUT_S = 5.0
MAX_LINE_CHARS = 500  # a hit's line, as answered; a longer one ends with CUT
CUT = "…"
# What rg prints of one line (--max-columns, in bytes): a line of megabytes (a pasted data
# URI) is a hit like any other, its start shown. rg's JSON output ignores --max-columns,
# so its plain output is read: `path NUL number : line`.
MAX_COLUMNS = 4 * MAX_LINE_CHARS
# What is read of one line of rg's output, whatever rg prints; the rest is skipped.
MAX_OUTPUT_LINE = 64 * 1024
READ_BYTES = 64 * 1024
BATCH_LINES = 256  # rg's lines parsed at once, off the loop
BATCH_BYTES = 1024 * 1024
_OMITTED = (b" [... omitted end of long line]", b"[Omitted long line")


def find_rg() -> str | None:
    """The `rg` installed beside this interpreter (the `ripgrep` wheel), else one on PATH.

    Services start with a minimal PATH, so the venv's own copy comes first."""
    beside = Path(sysconfig.get_path("scripts")) / "rg"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("rg")


class Ripgrep:
    def __init__(
        self,
        locations: Locations,
        policy: DocumentPolicy,
        timeout_s: float = TIMEOUT_S,
        converted_files: Callable[[str], Awaitable[dict[str, list[str]]]] | None = None,
    ) -> None:
        """`converted_files(kb)`: the paths of the KB's documents converted from files, by
        the files' digests (their converted text is grepped too)."""
        self.locations = locations
        self.policy = policy
        self.timeout_s = timeout_s
        self.converted_files = converted_files
        self.binary = find_rg()

    async def grep(
        self, kb: str, pattern: str, max_matches: int, ignore_case: bool = False
    ) -> tuple[list[RawHit], bool]:
        """Matches in the KB's files rg can read as they are, and in the text converted
        from its other documents (a PDF's, a Word file's), given the path of its file."""
        if self.binary is None:
            raise EngineUnavailable("ripgrep (rg) is not installed", engine="ripgrep")
        docs = self.policy.boundary.root(kb)
        if not os.access(docs, os.R_OK | os.X_OK):
            folder = self.locations.docs_folder(kb)  # as people know it, not resolved
            raise StorageError(f"the docs folder {folder} cannot be read", path=str(folder))
        flags = [*(["--ignore-case"] if ignore_case else []), "-e", pattern, "--", "."]
        hits: list[RawHit] = []
        try:
            async with asyncio.timeout(self.timeout_s):
                truncated = await self._run(
                    docs,
                    [*self.policy.ripgrep_args(kb), *flags],
                    hits,
                    max_matches,
                    lambda path, line: self.policy.is_document(kb, path),
                )
                derived = self.locations.derived_dir(kb)
                usable = derived.is_dir() and not home_folder_problem(self.locations.home, derived)
                if not truncated and self.converted_files and usable:  # never through a link
                    files = await self.converted_files(kb)
                    texts = _Texts(derived, files)
                    found: list[RawHit] = []
                    truncated = await self._run(
                        derived,
                        ["--iglob", f"*{CONVERTED_TEXT}", *flags],
                        found,
                        max_matches,
                        texts.accept,
                    )
                    placed = [texts.place(hit) for hit in found]
                    hits += self._as_documents(kb, files, placed, max_matches)
        except TimeoutError:
            truncated = True
        hits.sort(key=lambda hit: (hit.path, hit.page or 0, hit.line_number))
        if len(hits) > max_matches:
            del hits[max_matches:]
            truncated = True
        return hits, truncated

    async def _run(
        self,
        cwd: Path,
        args: list[str],
        hits: list[RawHit],
        max_matches: int,
        accept: Callable[[str, int], bool],
    ) -> bool:
        """One rg over `cwd`, its matches `accept`ed (by path and line) into `hits`; True when there
        were more than `max_matches`. A timeout (raised) leaves what was found."""
        proc = await asyncio.create_subprocess_exec(
            self.binary or "rg", "--no-config", "--no-ignore", "--no-messages",
            "--sort=path", "--no-heading", "--with-filename", "--line-number", "--null",
            "--color=never", f"--max-columns={MAX_COLUMNS}", "--max-columns-preview",
            *args,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            truncated = await _collect(proc, hits, max_matches, accept)
            if truncated:  # enough: do not wait for rg to scan the rest
                child_processes.kill(proc)
            stderr = await proc.stderr.read() if proc.stderr else b""
            code = await proc.wait()
        finally:
            if proc.returncode is None:
                child_processes.kill(proc)
                await proc.wait()
        if code == 2 and not hits and not truncated:
            message = stderr.decode(errors="replace").strip() or "ripgrep failed"
            raise InvalidPattern(f"invalid pattern: {message}", field="pattern")
        return truncated

    def _as_documents(
        self, kb: str, files: dict[str, list[str]], found: list[RawHit], limit: int
    ) -> list[RawHit]:
        """Hits in converted texts (`ab/<digest>.md`) as hits in the documents converted
        from files with that digest, one per copy, up to `limit`."""
        out: list[RawHit] = []
        for hit in found:
            for path in files[_digest(hit.path)]:
                if self.policy.is_document(kb, path):
                    out.append(replace(hit, path=path))
                    if len(out) > limit:
                        return out
        return out


class _Texts:
    """Which hits in converted texts count: in the text of a document there is now, below
    the frontmatter Coffer wrote above it, not on a page's mark; and where each is, in its
    page (slide, sheet) when the text has pages (its lines read once per text)."""

    def __init__(self, folder: Path, files: dict[str, list[str]]) -> None:
        self.folder = folder
        self.files = files
        self.heads: dict[str, int] = {}
        self.pages: dict[str, list[PageStart]] = {}

    def accept(self, path: str, line: int) -> bool:
        if not path.endswith(CONVERTED_TEXT) or _digest(path) not in self.files:
            return False
        head = self.heads.get(path)
        if head is None:
            head = self.heads[path] = _frontmatter_lines(self.folder / path)
            self.pages[path] = _page_starts(self.folder / path)
        start = page_of(self.pages[path], line)
        return line > head and (start is None or start.line != line)

    def place(self, hit: RawHit) -> RawHit:
        """The hit as its page (slide, sheet) and its line within it, when it has pages."""
        start = page_of(self.pages.get(hit.path, []), hit.line_number)
        if start is None:
            return hit
        line = line_in_page(start, hit.line_number)
        return RawHit(hit.path, line, hit.line, start.ordinal, start.location)


def _digest(path: str) -> str:
    return path.rpartition("/")[2].removesuffix(CONVERTED_TEXT)


def _page_starts(path: Path) -> list[PageStart]:
    """Where the pages of a converted text start, read through a map of the file (never
    decoded whole); none when it cannot be read."""
    try:
        with path.open("rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return []
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                return page_starts_in(mapped)
    except (OSError, ValueError):
        return []


def _frontmatter_lines(path: Path) -> int:
    """How many lines the frontmatter at the start of a converted text takes (0: none)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(8192)
    except OSError:
        return 0
    end = head.find(b"\n---\n", 3) if head.startswith(b"---\n") else -1
    return head.count(b"\n", 0, end + 5) if end >= 0 else 0


async def _collect(
    proc: asyncio.subprocess.Process,
    hits: list[RawHit],
    limit: int,
    accept: Callable[[str, int], bool],
) -> bool:
    """Read rg's lines into `hits` (those `accept`ed, by path and line); True when more
    matches exist than `limit`. At most MAX_OUTPUT_LINE bytes of one line are kept, so no
    line, however long, costs more or loses the other files' hits. Lines are parsed and
    judged in batches off the serving loop: judging a path may read an ignore file."""
    batch: list[bytes] = []
    held = 0
    async for raw in _lines(proc.stdout):  # type: ignore[arg-type]
        batch.append(raw)
        held += len(raw)
        if len(batch) >= BATCH_LINES or held >= BATCH_BYTES:
            hits += await asyncio.to_thread(_matches, batch, accept)
            batch, held = [], 0
            if len(hits) > limit:
                del hits[limit:]
                return True
    hits += await asyncio.to_thread(_matches, batch, accept)
    if len(hits) > limit:
        del hits[limit:]
        return True
    return False


async def _lines(stream: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """The stream's lines (without their newline), each cut to MAX_OUTPUT_LINE bytes (a cut
    line ends with NUL, which no line rg prints holds after its path)."""
    line = bytearray()
    skipping = False
    while chunk := await stream.read(READ_BYTES):
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start : end if end >= 0 else len(chunk)]
            if not skipping:
                line += piece[: MAX_OUTPUT_LINE - len(line)]
                if len(line) >= MAX_OUTPUT_LINE:
                    skipping = True
            if end < 0:
                break
            yield bytes(line) + (b"\0" if skipping else b"")
            line.clear()
            skipping = False
            start = end + 1
    if line:
        yield bytes(line) + (b"\0" if skipping else b"")


def _matches(lines: list[bytes], accept: Callable[[str, int], bool]) -> list[RawHit]:
    found = []
    for raw in lines:
        name, nul, rest = raw.partition(b"\0")
        number, colon, text = rest.partition(b":")
        if not nul or not colon or not number.isdigit():
            continue  # not a match (rg's note on a binary file)
        path = name.decode("utf-8", errors="replace")
        path = normalize_relpath(path[2:] if path.startswith("./") else path)
        line_number = int(number)
        if accept(path, line_number):
            found.append(RawHit(path, line_number, _shown(text)))
    return found


def _shown(text: bytes) -> str:
    """A hit's line: up to MAX_LINE_CHARS characters, ending with CUT when it was longer
    (cut here, by rg's --max-columns, or by MAX_OUTPUT_LINE)."""
    cut = text.endswith(b"\0")
    text = text.rstrip(b"\0").rstrip(b"\r")
    for marker in _OMITTED:
        where = text.find(marker)
        if where >= 0:
            text, cut = text[:where], True
    line = text.decode("utf-8", errors="replace")
    if cut or len(line) > MAX_LINE_CHARS:
        line = line[: MAX_LINE_CHARS - len(CUT)].rstrip("\ufffd") + CUT
    return line

"""Converting documents to Markdown (the MarkdownConverter port), safely.

markitdown runs in a worker process (convert_worker) with a memory cap and a wall-clock
timeout per document; zip-based formats are checked for bombs before they reach it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import sys
import zipfile
from pathlib import Path

from cofferd.domain import formats
from cofferd.domain.errors import EngineUnavailable
from cofferd.domain.failures import ConversionFailed
from cofferd.domain.index_records import Converted
from cofferd.infrastructure.files.confinement import home_folder

log = logging.getLogger(__name__)

CONVERTED_FORMATS = (*formats.CONVERTED_FORMATS, "htm")
ZIP_FORMATS = ("docx", "pptx", "xlsx", "epub")
TIMEOUT_S = 60.0
MEMORY_MB = 2048
IDLE_S = 30.0  # the converter's process ends after this long without a conversion
MAX_UNCOMPRESSED_BYTES = 512 * 1024 * 1024
MAX_COMPRESSION_RATIO = 100
MiB = 1024 * 1024
REPLY_LIMIT_BYTES = 256 * MiB  # JSON of at most 32 million characters, escaped


OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # what a password wraps Office files in
OFFICE_FORMATS = ("docx", "pptx", "xlsx")
ENCRYPTED_OFFICE = (
    "encrypted: a password-protected Office file (or an old .doc/.xls/.ppt named as the new format)"
)
ENCRYPTED_PDF = "encrypted: the PDF cannot be read without its password"
ENCRYPTED_EPUB = "encrypted: an e-book with DRM"


def check_zip(path: Path, fmt: str = "") -> None:
    """Refuse archives that inflate to far more than they weigh (zip bombs), and say
    what is encrypted: an Office file with a password is no zip but an OLE container; an
    EPUB with DRM lists its encrypted parts."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (UnicodeDecodeError, ValueError, EOFError) as exc:  # a directory that lies
        raise ConversionFailed(f"damaged, or not a readable {fmt} file: {exc}") from None
    except (zipfile.BadZipFile, OSError):
        if fmt in OFFICE_FORMATS:
            with contextlib.suppress(OSError), path.open("rb") as fh:
                if fh.read(len(OLE_MAGIC)) == OLE_MAGIC:
                    raise ConversionFailed(ENCRYPTED_OFFICE) from None
        return  # not a zip after all: markitdown decides what it is
    if fmt == "epub" and any(i.filename == "META-INF/encryption.xml" for i in infos):
        raise ConversionFailed(ENCRYPTED_EPUB)
    inflated = sum(i.file_size for i in infos)
    packed = sum(i.compress_size for i in infos)
    if inflated > MAX_UNCOMPRESSED_BYTES:
        raise ConversionFailed(
            f"too large: the archive inflates to {inflated:,} bytes "
            f"(limit {MAX_UNCOMPRESSED_BYTES:,})"
        )
    if packed and inflated / packed > MAX_COMPRESSION_RATIO and inflated > 10 * 1024 * 1024:
        raise ConversionFailed(
            f"too large: the archive's compression ratio {inflated / packed:.0f}:1 is beyond "
            f"{MAX_COMPRESSION_RATIO}:1 (a zip bomb?)"
        )


def is_zip(path: Path) -> bool:
    """Whether the file is a zip archive, whatever its name says (a zip named x.pdf is
    converted as the zip it is)."""
    with contextlib.suppress(OSError), path.open("rb") as fh:
        return fh.read(4) == b"PK\x03\x04"
    return False


def _explained(error: str, fmt: str) -> str:
    """What a converter's exception means to the person whose file it is, as a sentence."""
    if fmt == "pdf" and ("PDFPasswordIncorrect" in error or "PDFEncryption" in error):
        return ENCRYPTED_PDF
    said = _sentence(error)
    if "memory" in said:
        return said
    return f"damaged, or not a readable {fmt} file: {said}"


# escapes a library's repr leaves in its message (`PSEOF\n`), and control characters
_NOT_PROSE = re.compile(r"\\[nrt]|[\x00-\x1f\x7f-\x9f\u2028\u2029]")
SENTENCE_CHARS = 300


def _sentence(error: str) -> str:
    """An exception's message as one line of prose: no escapes, no control characters,
    its spaces single, at most SENTENCE_CHARS."""
    text = " ".join(_NOT_PROSE.sub(" ", error[: SENTENCE_CHARS * 4]).split())
    return text if len(text) <= SENTENCE_CHARS else text[: SENTENCE_CHARS - 1] + "…"


class WorkerConverter:
    """Conversions one at a time through one worker process (at `nice`, for work in the
    background), which ends after `IDLE_S` without a conversion (its ~160 MB go back to
    the system) and starts again for the next."""

    engine = "markitdown"

    def __init__(
        self,
        *,
        timeout_s: float = TIMEOUT_S,
        memory_mb: int = MEMORY_MB,
        nice: int = 0,
        home: tuple[Path, Path] | None = None,
    ) -> None:
        """`home`: (the data home, a folder of it): the process's home, cache and temp
        folder (the libraries markitdown loads write caches there, not in the user's home
        or /tmp), made when missing and refused when it is a link."""
        self.timeout_s = timeout_s
        self.home = home
        self.memory_mb = memory_mb
        self.nice = nice
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._requests = 0
        self._closing = False
        self._idle: asyncio.TimerHandle | None = None
        self._releasing: set[asyncio.Task[None]] = set()

    def formats(self) -> tuple[str, ...]:
        return CONVERTED_FORMATS

    async def convert(self, path: Path, fmt: str) -> Converted:
        if fmt in ZIP_FORMATS or await asyncio.to_thread(is_zip, path):
            await asyncio.to_thread(check_zip, path, fmt)
        try:
            return await self._convert(path, fmt)
        finally:
            self._release_when_idle()

    def _release_when_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        self._idle = asyncio.get_running_loop().call_later(IDLE_S, self._release_now)

    def _release_now(self) -> None:
        task = asyncio.ensure_future(self.release())
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    async def _convert(self, path: Path, fmt: str) -> Converted:
        async with self._lock:
            proc = await self._worker()
            assert proc.stdin is not None and proc.stdout is not None
            self._requests += 1
            request_id = self._requests
            request = json.dumps({"id": request_id, "path": str(path), "format": fmt}) + "\n"
            try:
                async with asyncio.timeout(self.timeout_s):
                    proc.stdin.write(request.encode())
                    await proc.stdin.drain()
                    line = await proc.stdout.readline()
            except TimeoutError:
                await self._kill()
                raise ConversionFailed(
                    f"conversion took longer than {self.timeout_s:g} s and was stopped",
                    transient=True,
                ) from None
            except ValueError:  # a reply line over its limit: the text is a bomb
                await self._kill()
                raise ConversionFailed(
                    f"too large: its converted text is over {REPLY_LIMIT_BYTES // MiB} MiB"
                ) from None
            except (BrokenPipeError, ConnectionResetError):
                line = b""
            if not line:
                code = await self._kill()
                if self._closing:
                    raise EngineUnavailable("cofferd is stopping; add the file again later")
                raise ConversionFailed(
                    f"the converter crashed on this document (exit {code})", transient=True
                )
            try:
                reply = await asyncio.to_thread(json.loads, line)  # maybe tens of MB
                if reply.get("id") != request_id:
                    raise ValueError("reply to another request")
            except ValueError:
                await self._kill()  # out of step: never take a reply for another document
                raise ConversionFailed(
                    "the converter answered out of turn", transient=True
                ) from None
        if not reply["ok"]:
            raise ConversionFailed(_explained(reply["error"], fmt))
        return Converted(markdown=reply["markdown"] or "", title=reply.get("title"))

    async def _worker(self) -> asyncio.subprocess.Process:
        if self._closing:
            raise EngineUnavailable("cofferd is stopping; add the file again later")
        if self._proc is None or self._proc.returncode is not None:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cofferd.infrastructure.workers.convert_entry",
                str(self.memory_mb), str(self.nice),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=REPLY_LIMIT_BYTES,
                env=await asyncio.to_thread(self._environment),
            )  # fmt: skip
        return self._proc

    def _environment(self) -> dict[str, str] | None:
        if self.home is None:
            return None
        data_home, folder = self.home
        try:
            with home_folder(data_home, folder, make=True):
                pass  # a folder of the data home, reached through no link
        except OSError as exc:  # FolderRefused too: a link or a file on the way
            raise EngineUnavailable(f"the converter's folder cannot be used: {exc}") from None
        places = ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "TMPDIR")
        return {**os.environ, **dict.fromkeys(places, str(folder))}

    async def _kill(self) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        return await proc.wait()

    async def release(self) -> None:
        """End the worker process between conversions (its memory goes back to the
        system); the next conversion starts another."""
        async with self._lock:
            await self._end()

    async def interrupt(self) -> None:
        """Stop the conversion in flight at once (the daemon is stopping): its caller is
        answered with an error instead of waiting up to the conversion's time limit."""
        self._closing = True
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    async def close(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        await self.interrupt()
        async with self._lock:
            await self._end()
        await asyncio.gather(*self._releasing, return_exceptions=True)

    async def _end(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                async with asyncio.timeout(5):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()

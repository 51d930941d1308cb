"""Uploads: a multipart `file` part streamed to disk, refused as soon as it passes the
knowledge base's size limit, then added like any file.

A `source_path` field names where the client read the file (cofferctl sends it): the
document tracks that file for check-sources, as if the daemon had read it there. This is
how files reach a daemon that cannot see them (a service with a private /tmp). A `folder`
field names the knowledge base's folder a new document goes into."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aiohttp import BodyPartReader, MultipartReader, web

from cofferd.application.documents.ingest import IngestResult
from cofferd.domain.errors import IngestRejected, StorageError, ValidationFailed
from cofferd.infrastructure.files.confinement import HomeScratch
from cofferd.surfaces.core import Coffer
from cofferd.surfaces.http.json_shapes import flag

UPLOAD_CHUNK = 256 * 1024
UPLOAD_PREFIX = "upload-"  # files in incoming/ with this prefix are cleared at start


async def receive_upload(
    request: web.Request, coffer: Coffer, name: str, actor: str, *, replace: bool = False
) -> IngestResult:
    """Stream the `file` part to disk, refusing it as soon as it passes the KB's limit;
    `replace` (the query's) is overridden by a `replace` field."""
    limit = coffer.kbs.get_enabled(name).config.max_document_bytes
    locations = coffer.locations
    incoming = HomeScratch(locations.home, locations.incoming_dir, UPLOAD_PREFIX)
    try:
        reader = await request.multipart()
    except (ValueError, AssertionError, KeyError) as exc:  # no or a broken boundary
        raise ValidationFailed(f"not a valid multipart body: {exc}") from None
    tmp: Path | None = None
    filename = None
    source_path: str | None = None
    folder: str | None = None
    try:
        while (part := await _next_part(reader)) is not None:
            if not isinstance(part, BodyPartReader):
                continue
            if part.name in ("replace", "source_path", "folder"):
                value = (await part.read(decode=False)).decode("utf-8", "replace")
                if part.name == "replace":
                    replace = flag(value, "replace")
                elif part.name == "folder":
                    folder = value
                else:
                    source_path = _source_path(value)
            elif part.name == "file" and tmp is None:
                filename = part.filename
                if not filename:
                    raise ValidationFailed("the file part needs a filename", field="file")
                if "\0" in filename or len(filename) > 255:
                    raise ValidationFailed("the file name is not a valid name", field="file")
                try:
                    fd, tmp = incoming.new_file("")
                except OSError as exc:  # incoming/ is a link (refused), or the disk failed
                    raise StorageError(
                        f"the upload cannot be received: {exc}", path=str(incoming.folder)
                    ) from None
                size = 0
                with os.fdopen(fd, "wb") as fh:
                    while chunk := await part.read_chunk(UPLOAD_CHUNK):
                        size += len(chunk)
                        if size > limit:
                            raise IngestRejected(
                                "too_large",
                                f"{filename!r} is larger than this knowledge base takes "
                                f"({limit:,} bytes)",
                                limit=limit,
                            )
                        fh.write(chunk)
        if tmp is None or filename is None:
            raise ValidationFailed("multipart field 'file' is required", field="file")
        return await coffer.ingest.add_file(
            name,
            tmp,
            filename,
            replace=replace,
            source_path=source_path,
            actor=actor,
            folder=folder,
        )
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def _source_path(value: str) -> str:
    if not value.startswith("/") or "\0" in value or len(value) > 4096:
        raise ValidationFailed("source_path must be an absolute path", field="source_path")
    return value


async def _next_part(reader: MultipartReader) -> Any:
    try:
        return await reader.next()
    except (ValueError, AssertionError) as exc:  # a broken part
        raise ValidationFailed(f"not a valid multipart body: {exc}") from None

"""Every error Coffer reports to a caller, each with a stable code, a message and details.

    CofferError
    ├── ValidationFailed          VALIDATION_ERROR
    │   └── InvalidPattern        INVALID_PATTERN
    ├── PathRefused               PATH_REFUSED
    ├── PayloadTooLarge           PAYLOAD_TOO_LARGE
    ├── NotFound
    │   ├── KBNotFound            KB_NOT_FOUND
    │   ├── DocumentNotFound      DOCUMENT_NOT_FOUND
    │   └── TrashEntryNotFound    TRASH_ENTRY_NOT_FOUND
    ├── Conflict                  (the request meets the state of a KB or a document)
    │   ├── KBExists              KB_EXISTS
    │   ├── KBDisabled            KB_DISABLED
    │   ├── KBUnavailable         KB_UNAVAILABLE
    │   ├── ModeDisabled          MODE_DISABLED
    │   ├── DocumentChanged       DOCUMENT_CHANGED
    │   ├── DocumentAmbiguous     DOCUMENT_AMBIGUOUS
    │   ├── DocumentReadOnly      DOCUMENT_READ_ONLY
    │   ├── ReconversionBlocked   RECONVERSION_BLOCKED
    │   ├── SourceMissing         SOURCE_MISSING
    │   ├── PathOccupied          PATH_OCCUPIED
    │   └── PortUnavailable       PORT_UNAVAILABLE
    ├── IngestRejected            INGEST_REJECTED
    ├── EngineUnavailable         ENGINE_UNAVAILABLE
    ├── IndexRebuilding           INDEX_REBUILDING (details: retry_after_s)
    └── StorageError              STORAGE_ERROR

The HTTP surface gives each code its status (surfaces/http/error_envelope) and puts the
error in the envelope `{"error": {"code", "message", "details"}}`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar


class CofferError(Exception):
    code: ClassVar[str] = "INTERNAL_ERROR"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details


class ValidationFailed(CofferError):
    code = "VALIDATION_ERROR"


class InvalidPattern(ValidationFailed):
    code = "INVALID_PATTERN"


class PathRefused(CofferError):
    """A file on this machine that Coffer will not read for this caller."""

    code = "PATH_REFUSED"


class PayloadTooLarge(CofferError):
    code = "PAYLOAD_TOO_LARGE"


class NotFound(CofferError):
    """Something named that is not there."""


class KBNotFound(NotFound):
    code = "KB_NOT_FOUND"

    def __init__(self, name: str, suggestions: Sequence[str] = ()) -> None:
        """`suggestions`: knowledge bases of close names, closest first."""
        message = f"knowledge base {name!r} does not exist"
        if not suggestions:
            super().__init__(message, name=name)
            return
        near = " or ".join(suggestions)
        super().__init__(
            f"{message}; did you mean {near}?", name=name, suggestions=list(suggestions)
        )


class DocumentNotFound(NotFound):
    code = "DOCUMENT_NOT_FOUND"

    def __init__(
        self, kb: str, doc_id: str, suggestions: list[dict[str, str]] | None = None
    ) -> None:
        """`suggestions`: documents of close names ({id, relative_path, title})."""
        message = f"document {doc_id!r} does not exist in {kb!r}"
        if not suggestions:
            super().__init__(message, kb=kb, id=doc_id)
            return
        near = " or ".join(f"{s['relative_path']} ({s['title']})" for s in suggestions)
        super().__init__(
            f"{message}; did you mean {near}?", kb=kb, id=doc_id, suggestions=suggestions
        )


class TrashEntryNotFound(NotFound):
    code = "TRASH_ENTRY_NOT_FOUND"

    def __init__(self, kb: str, trash_id: str) -> None:
        super().__init__(
            f"{trash_id!r} is not in the trash of {kb!r} (never there, restored or expired)",
            kb=kb,
            id=trash_id,
        )


class Conflict(CofferError):
    """A request the state of a KB or a document refuses."""


class KBExists(Conflict):
    code = "KB_EXISTS"

    def __init__(self, name: str) -> None:
        super().__init__(f"knowledge base {name!r} already exists", name=name)


class KBDisabled(Conflict):
    code = "KB_DISABLED"

    def __init__(self, name: str) -> None:
        super().__init__(f"knowledge base {name!r} is disabled; enable it first", name=name)


class KBUnavailable(Conflict):
    """A KB whose folder may not be used now: missing, replaced, or a link this machine
    did not attach. Nothing is read or written there until it is fixed."""

    code = "KB_UNAVAILABLE"

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"knowledge base {name!r} is unavailable: {why}", name=name)
        self.why = why


class ModeDisabled(Conflict):
    """A retrieval mode that is not in the knowledge base's enabled_modes."""

    code = "MODE_DISABLED"

    def __init__(self, name: str, mode: str, enabled: list[str]) -> None:
        super().__init__(
            f"{mode} is not enabled for knowledge base {name!r} (enabled_modes: "
            f"{', '.join(enabled) or 'none'}); add it with: cofferctl kb set {name} "
            f"enabled_modes={','.join([*enabled, mode])}",
            name=name,
            mode=mode,
            enabled_modes=enabled,
        )


class DocumentChanged(Conflict):
    code = "DOCUMENT_CHANGED"


class DocumentAmbiguous(Conflict):
    """An id prefix that more than one document's id starts with."""

    code = "DOCUMENT_AMBIGUOUS"


class DocumentReadOnly(Conflict):
    """A document indexed from a file that is no Markdown (a PDF, a Word file, plain
    text): the file is the person's own, edited where it lies, never written by Coffer."""

    code = "DOCUMENT_READ_ONLY"


class ReconversionBlocked(Conflict):
    code = "RECONVERSION_BLOCKED"


class SourceMissing(Conflict):
    code = "SOURCE_MISSING"


class PathOccupied(Conflict):
    """A file sits where a document would be put back; it is never overwritten."""

    code = "PATH_OCCUPIED"


class PortUnavailable(Conflict):
    """The port asked for the web page is taken (or not ours to take)."""

    code = "PORT_UNAVAILABLE"


class IngestRejected(CofferError):
    """details["reason"] is one of: empty, too_large, unsupported_type, duplicate,
    conversion_failed, already_indexed (the file lies in the KB's folder, indexed there)."""

    code = "INGEST_REJECTED"

    def __init__(self, reason: str, message: str, **details: object) -> None:
        super().__init__(message, reason=reason, **details)
        self.reason = reason


class EngineUnavailable(CofferError):
    code = "ENGINE_UNAVAILABLE"


class IndexRebuilding(CofferError):
    """The index is being rebuilt from the files (it was damaged): try again shortly."""

    code = "INDEX_REBUILDING"
    retry_after_s: ClassVar[int] = 5

    def __init__(self, why: str) -> None:
        super().__init__(
            f"{why}; it is being rebuilt from the files: try again in {self.retry_after_s} s",
            retry_after_s=self.retry_after_s,
        )


class StorageError(CofferError):
    """The disk refused: full, read-only, unreadable, or the index is damaged."""

    code = "STORAGE_ERROR"

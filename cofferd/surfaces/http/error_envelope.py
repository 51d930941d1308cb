"""The one place that turns any failure into `{"error": {"code", "message", "details"}}`,
and gives each of the domain's error codes its HTTP status (`STATUSES`)."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pydantic
from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, HttpProcessingError, LineTooLong

from cofferd.domain.errors import CofferError, IndexRebuilding, StorageError, ValidationFailed
from cofferd.domain.validation import validation_failed

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# The status of each code a CofferError carries (domain/errors); tests/test_api.py holds
# every error class of the domain to having one here.
STATUSES = {
    "INTERNAL_ERROR": 500,
    "VALIDATION_ERROR": 400,
    "INVALID_PATTERN": 400,
    "PATH_REFUSED": 403,
    "PAYLOAD_TOO_LARGE": 413,
    "KB_NOT_FOUND": 404,
    "DOCUMENT_NOT_FOUND": 404,
    "TRASH_ENTRY_NOT_FOUND": 404,
    "KB_EXISTS": 409,
    "KB_DISABLED": 409,
    "KB_UNAVAILABLE": 409,
    "MODE_DISABLED": 409,
    "DOCUMENT_CHANGED": 409,
    "DOCUMENT_AMBIGUOUS": 409,
    "DOCUMENT_READ_ONLY": 409,
    "RECONVERSION_BLOCKED": 409,
    "SOURCE_MISSING": 409,
    "PATH_OCCUPIED": 409,
    "PORT_UNAVAILABLE": 409,
    "INGEST_REJECTED": 422,
    "ENGINE_UNAVAILABLE": 503,
    "INDEX_REBUILDING": 503,  # with Retry-After
    "STORAGE_ERROR": 507,
}
HTTP_CODES = {
    400: "BAD_REQUEST",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
    414: "URI_TOO_LONG",
    415: "UNSUPPORTED_MEDIA_TYPE",
    431: "HEADERS_TOO_LARGE",
}
# The middleware refuses a URL or a header over these; aiohttp's parser refuses a request
# line or header over its own limits (and more headers than MAX_HEADERS) before any handler
# runs, answered in the envelope too (http.server). The two parser limits differ: which one
# a refusal names tells a request line (414) from a header (431).
MAX_URL = 8192
MAX_HEADER = 8192
PARSER_LIMIT = 65536  # the request line
PARSER_FIELD_LIMIT = 2 * MAX_HEADER  # one header, name and value
MAX_HEADERS = 128
PARSER_LIMITS = {
    "max_line_size": PARSER_LIMIT,
    "max_field_size": PARSER_FIELD_LIMIT,
    "max_headers": MAX_HEADERS,
}
LOGGED_CHARS = 300  # a logged value is cut to this length


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None, **details: Any
) -> web.Response:
    return web.json_response(
        {"error": {"code": code, "message": message, "details": details}},
        status=status,
        headers=headers,
    )


def refusal(status: int) -> web.Response:
    """The envelope for a bare HTTP status (what aiohttp refused without saying why)."""
    code = HTTP_CODES.get(status) or ("INTERNAL_ERROR" if status >= 500 else "BAD_REQUEST")
    if status >= 500:
        return error_response(status, code, "internal error; see the daemon's log")
    return error_response(status, code, f"the request was refused ({status})")


def _unparsable(exc: HttpProcessingError) -> web.Response:
    """A request aiohttp's parser refused: too long, too many headers, or not HTTP."""
    if isinstance(exc, LineTooLong) and exc.args[1:2] == (PARSER_LIMIT,):
        return error_response(
            414, "URI_TOO_LONG", f"the request line is longer than {PARSER_LIMIT} bytes"
        )
    if isinstance(exc, LineTooLong) and exc.args[1:2] == (PARSER_FIELD_LIMIT,):
        message = f"a header is longer than {PARSER_FIELD_LIMIT} bytes"
        return error_response(431, "HEADERS_TOO_LARGE", message)
    if isinstance(exc, BadHttpMessage) and "too many headers" in exc.message.lower():
        message = f"the request has more than {MAX_HEADERS} headers"
        return error_response(431, "HEADERS_TOO_LARGE", message)
    # aiohttp's message: what is wrong, a blank line, then the bytes and a caret under them
    said = (exc.message or type(exc).__name__).strip().split("\n\n")[0]
    reason = " ".join(line.strip() for line in said.splitlines()).rstrip(":")
    return error_response(400, "BAD_REQUEST", f"malformed request: {reason[:LOGGED_CHARS]}")


def status_of(exc: CofferError) -> int:
    """The HTTP status of a domain error (500 for a code STATUSES lacks)."""
    return STATUSES.get(exc.code, 500)


def from_exception(exc: BaseException) -> web.Response:
    if isinstance(exc, CofferError):
        # Retry-After: the convention for "try again" with a 503
        retry = (
            {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, IndexRebuilding) else None
        )
        body = {"error": {"code": exc.code, "message": exc.message, "details": exc.details}}
        return web.json_response(body, status=status_of(exc), headers=retry)
    if isinstance(exc, pydantic.ValidationError):
        return from_exception(validation_failed("invalid request", exc))
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
        return from_exception(ValidationFailed(f"request body is not valid JSON: {exc}"))
    if isinstance(exc, HttpProcessingError):  # a request (or a part of one) that is not HTTP
        return _unparsable(exc)
    if isinstance(exc, RecursionError):
        return from_exception(ValidationFailed("the request nests too deeply"))
    if isinstance(exc, OSError):  # the disk refused: full, read-only, unreadable
        log.error("storage error: %s", str(exc)[:LOGGED_CHARS])
        reason = exc.strerror or type(exc).__name__
        return from_exception(StorageError(f"the disk refused: {reason}", errno=exc.errno))
    if isinstance(exc, web.HTTPException) and exc.status >= 400:
        code = HTTP_CODES.get(exc.status, "BAD_REQUEST" if exc.status < 500 else "INTERNAL_ERROR")
        return error_response(exc.status, code, exc.reason)
    log.error("internal error: %s", exc, exc_info=exc)
    return error_response(500, "INTERNAL_ERROR", "internal error; see the daemon's log")


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if len(request.raw_path) > MAX_URL:
        return error_response(414, "URI_TOO_LONG", f"the URL is longer than {MAX_URL} bytes")
    if any(len(k) + len(v) > MAX_HEADER for k, v in request.headers.items()):
        return error_response(
            431, "HEADERS_TOO_LARGE", f"a header is longer than {MAX_HEADER} bytes"
        )
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status in (404, 405):
            code = HTTP_CODES[exc.status]
            allowed = getattr(exc, "allowed_methods", None)
            return error_response(
                exc.status,
                code,
                f"{exc.reason}: {request.method} {request.path[:LOGGED_CHARS]}",
                headers={"Allow": ", ".join(sorted(allowed))} if allowed else None,
            )
        return from_exception(exc)
    except Exception as exc:  # noqa: BLE001 - the API boundary; unexpected errors are logged
        return from_exception(exc)

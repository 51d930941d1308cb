"""The one place that turns any failure into `{"error": {"code", "message", "details"}}`."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pydantic
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from cofferd.domain.errors import CofferError, StorageError, ValidationFailed
from cofferd.domain.validation import validation_failed

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

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
# Requests up to PARSER_LIMIT get the envelope when over these; beyond it, aiohttp's parser
# refuses them before any handler runs.
MAX_URL = 8192
MAX_HEADER = 8192
PARSER_LIMIT = 65536
LOGGED_CHARS = 300  # a logged value is cut to this length


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None, **details: Any
) -> web.Response:
    return web.json_response(
        {"error": {"code": code, "message": message, "details": details}},
        status=status,
        headers=headers,
    )


def from_exception(exc: BaseException) -> web.Response:
    if isinstance(exc, CofferError):
        return web.json_response(exc.envelope(), status=exc.status)
    if isinstance(exc, pydantic.ValidationError):
        return from_exception(validation_failed("invalid request", exc))
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
        return from_exception(ValidationFailed(f"request body is not valid JSON: {exc}"))
    if isinstance(exc, HttpProcessingError):  # a request (or a part of one) that is not HTTP
        return error_response(400, "BAD_REQUEST", f"malformed request: {exc.message}")
    if isinstance(exc, RecursionError):
        return from_exception(ValidationFailed("the request nests too deeply"))
    if isinstance(exc, OSError):  # the disk refused: full, read-only, unreadable
        log.error("storage error: %s", str(exc)[:LOGGED_CHARS])
        reason = exc.strerror or type(exc).__name__
        return from_exception(StorageError(f"the disk refused: {reason}", errno=exc.errno))
    if isinstance(exc, web.HTTPException) and exc.status >= 400:
        code = HTTP_CODES.get(exc.status, f"HTTP_{exc.status}")
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

"""The one place that turns any failure into `{"error": {"code", "message", "details"}}`."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pydantic
from aiohttp import web

from cofferd.domain.config import validation_failed
from cofferd.domain.errors import CofferError, ValidationFailed

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

HTTP_CODES = {
    400: "BAD_REQUEST",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
}


def error_response(status: int, code: str, message: str, **details: Any) -> web.Response:
    return web.json_response(
        {"error": {"code": code, "message": message, "details": details}}, status=status
    )


def from_exception(exc: BaseException) -> web.Response:
    if isinstance(exc, CofferError):
        return web.json_response(exc.envelope(), status=exc.status)
    if isinstance(exc, pydantic.ValidationError):
        return from_exception(validation_failed("invalid request", exc))
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
        return from_exception(ValidationFailed(f"request body is not valid JSON: {exc}"))
    if isinstance(exc, web.HTTPException) and exc.status >= 400:
        code = HTTP_CODES.get(exc.status, f"HTTP_{exc.status}")
        return error_response(exc.status, code, exc.reason)
    log.error("internal error: %s", exc, exc_info=exc)
    return error_response(500, "INTERNAL_ERROR", "internal error; see the daemon's log")


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status in (404, 405):
            code = HTTP_CODES[exc.status]
            return error_response(
                exc.status, code, f"{exc.reason}: {request.method} {request.path}"
            )
        return from_exception(exc)
    except Exception as exc:  # noqa: BLE001 - the API boundary; unexpected errors are logged
        return from_exception(exc)

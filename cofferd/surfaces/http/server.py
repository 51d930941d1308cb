"""What aiohttp refuses before any handler runs (a request line or header over the parser's
limits, too many headers, a malformed request line, a bad method, broken chunked encoding)
is answered in the error envelope too, never as aiohttp's plain text.

aiohttp answers those from `RequestHandler.handle_error`; `EnvelopeHandler` keeps what it
does (logging, the check that nothing was sent yet, closing the connection) and replaces
the body. aiohttp has no hook for that handler, so the application builds the server that
makes it (`CofferApplication._make_handler`, which `AppRunner` calls).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from cofferd.surfaces.http.error_envelope import PARSER_LIMITS, from_exception, refusal


class EnvelopeHandler(web.RequestHandler):
    """One connection's protocol; its refusals are JSON in the envelope."""

    def data_received(self, data: bytes) -> None:
        reading = getattr(self, "_current_request", None)
        queue: Sequence[Any] = getattr(self, "_messages", ())
        queued = len(queue)
        super().data_received(data)
        if reading is None or len(queue) <= queued or reading.content.is_eof():
            return
        # The body a handler is reading turned out broken (e.g. a bad chunk size): aiohttp's
        # C parser queues the refusal behind this request without telling its body, and the
        # handler would wait for the client to leave. The handler's read fails instead,
        # answered in the envelope (the pure-Python parser does this itself).
        refused = getattr(queue[-1][0], "exc", None)
        if isinstance(refused, HttpProcessingError):
            reading.content.set_exception(refused)

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs; raises if already answering
        response = from_exception(exc) if exc is not None else refusal(status)
        if exc is not None and response.status >= 500 and status < 500:
            response = refusal(status)  # aiohttp refused the request: never our 500
        response.force_close()
        return response


class EnvelopeServer(web.Server):
    """aiohttp's low-level server, making an `EnvelopeHandler` per connection."""

    def __call__(self) -> web.RequestHandler:
        return EnvelopeHandler(self, loop=self._loop, **self._kwargs)


with warnings.catch_warnings():
    # aiohttp discourages subclassing Application; this one only changes the server it makes
    warnings.simplefilter("ignore", DeprecationWarning)

    class CofferApplication(web.Application):
        """An application served with `EnvelopeServer` and the parser limits the envelope
        names (they override whatever limits a runner passes)."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(handler_args=dict(PARSER_LIMITS), **kwargs)

        def _make_handler(self, **kwargs: Any) -> web.Server:
            made = super()._make_handler(**kwargs)
            return EnvelopeServer(
                made.request_handler,
                request_factory=made.request_factory,
                handler_cancellation=made.handler_cancellation,
                loop=made._loop,
                **made._kwargs,
            )

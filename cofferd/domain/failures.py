"""Failures that ports raise and the application handles itself: never shown to a
caller as they are (the application turns them into a reason or an error of domain.errors)."""

from __future__ import annotations


class ConversionFailed(Exception):
    """The converter could not turn this document into Markdown (the message says why).
    `transient`: not for what the document is, maybe (stopped for its time, a crash): worth
    trying again later."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class EmbeddingFailed(Exception):
    """The embedding provider is unavailable or returned unusable vectors. Its message is
    never empty (logged as the reason, in the status and the API): a failure without
    words of its own is said by what it is (`otherwise`, e.g. an exception's type)."""

    def __init__(self, reason: str, otherwise: str = "no reason given") -> None:
        super().__init__(reason.strip() or otherwise)

"""Query strings: the parameters an endpoint takes are one model (`with_query`), and they
are what docs/openapi.yaml lists for it. A parameter the endpoint does not take, one given
twice, or a value that is not of its type is refused (400 VALIDATION_ERROR naming it);
endpoints without a model take no parameters at all."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Annotated, Any, Literal, TypeVar

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from coffer_kernel.bounds import (
    AUDIT_LIMIT_MAX,
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    NAMES_LIMIT_MAX,
    OFFSET_MAX,
    PATHS_LIMIT_DEFAULT,
    PATHS_LIMIT_MAX,
)
from cofferd.domain.errors import ValidationFailed
from cofferd.domain.validation import shown, validation_failed

INT_MAX = OFFSET_MAX
_WHOLE = re.compile(r"-?[0-9]{1,18}")  # what a query integer looks like (ASCII digits only)


def _whole_number(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if _WHOLE.fullmatch(value):
        return int(value)
    if re.fullmatch(r"-?[0-9]+", value):
        raise ValueError(f"{shown(value)} is out of range")
    raise ValueError(f"must be a whole number, not {shown(value)}")


def _boolean(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if value not in ("true", "false"):
        raise ValueError(f"must be true or false, not {shown(value)}")
    return value == "true"


QueryInt = Annotated[int, BeforeValidator(_whole_number)]
QueryBool = Annotated[bool, BeforeValidator(_boolean)]


class Query(BaseModel):
    """An endpoint's query parameters: each at most once, strictly typed, nothing else."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class NoQuery(Query):
    pass


class DocumentsQuery(Query):
    q: str | None = None  # a title filter
    limit: QueryInt = Field(default=50, ge=1, le=LIST_LIMIT_MAX)
    offset: QueryInt = Field(default=0, ge=0, le=INT_MAX)


class PageQuery(Query):
    """A page of a list: the same parameters as the documents' (`total` in the answer)."""

    limit: QueryInt = Field(default=LIST_LIMIT_DEFAULT, ge=1, le=LIST_LIMIT_MAX)
    offset: QueryInt = Field(default=0, ge=0, le=INT_MAX)


class PathsQuery(Query):
    """A page of paths: larger, for editors reading them all."""

    limit: QueryInt = Field(default=PATHS_LIMIT_DEFAULT, ge=1, le=PATHS_LIMIT_MAX)
    offset: QueryInt = Field(default=0, ge=0, le=INT_MAX)


class BacklinksQuery(PageQuery):
    # a file's path in the KB; percent-encoded, 600 characters stay within the URL's bound
    file: str = Field(min_length=1, max_length=600)


class NamesQuery(Query):
    q: str = Field(default="", max_length=200)  # what was typed after `[[`
    limit: QueryInt = Field(default=50, ge=1, le=NAMES_LIMIT_MAX)


class DocumentQuery(Query):
    file_text: QueryBool = False  # the whole file too, frontmatter included


class AddQuery(Query):
    replace: QueryBool = False


class AuditQuery(Query):
    kb: str | None = None
    event: str | None = Field(default=None, max_length=100)  # only these events
    actor: str | None = Field(default=None, max_length=100)  # only what this actor did
    limit: QueryInt = Field(default=50, ge=1, le=AUDIT_LIMIT_MAX)


class InvocationsQuery(Query):
    client: str | None = Field(default=None, max_length=100)  # only this agent's calls
    tool: str | None = Field(default=None, max_length=100)  # only this tool's
    limit: QueryInt = Field(default=50, ge=1, le=AUDIT_LIMIT_MAX)


class ResourcesQuery(Query):
    kind: Literal["knowledge_base"] | None = None


Q = TypeVar("Q", bound=Query)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
QUERIES: dict[Handler, type[Query]] = {}  # the handlers that take parameters, and which


def parse_query(request: web.Request, model: type[Q]) -> Q:
    values: dict[str, str] = {}
    for name in request.query:
        if name not in model.model_fields:
            takes = ", ".join(model.model_fields) or "none"
            raise ValidationFailed(
                f"unknown query parameter {shown(name)}; this endpoint takes: {takes}",
                field=name,
            )
        given = request.query.getall(name)
        if len(given) > 1:
            raise ValidationFailed(
                f"query parameter {name} is given {len(given)} times; give it once", field=name
            )
        values[name] = given[0]
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise validation_failed("invalid query", exc, model) from None


def with_query(
    model: type[Q],
) -> Callable[[Callable[[web.Request, Q], Awaitable[web.StreamResponse]]], Handler]:
    """A handler that takes `model`'s parameters, given to it parsed."""

    def wrap(fn: Callable[[web.Request, Q], Awaitable[web.StreamResponse]]) -> Handler:
        @wraps(fn)
        async def handler(request: web.Request) -> web.StreamResponse:
            return await fn(request, parse_query(request, model))

        QUERIES[handler] = model
        return handler

    return wrap


def query_model(handler: Handler) -> type[Query]:
    return QUERIES.get(handler, NoQuery)


@web.middleware
async def query_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Endpoints without parameters refuse any (unknown routes stay 404 and 405)."""
    route = request.match_info
    if route.http_exception is None and route.handler not in QUERIES:
        parse_query(request, NoQuery)
    return await handler(request)

"""Every error leaves the API as {"error": {"code", "message", "hint"}}: never a stack trace.

EokError subclasses carry their own HTTP status; anything unexpected becomes a 500 with a generic message
and a request id that matches the server-side log line holding the traceback.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.errors import EokError

log = logging.getLogger("eok.api")


class Unauthorized(EokError):
    http_status = 401
    code = "unauthorized"


class Forbidden(EokError):
    http_status = 403
    code = "forbidden"


class Conflict(EokError):
    http_status = 409
    code = "conflict"


class TooBusy(EokError):
    http_status = 429
    code = "too_many_runs"


def error_code(exc: EokError) -> str:
    explicit = getattr(exc, "code", None)
    if isinstance(explicit, str):
        return explicit
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__).lower()


def error_json(status: int, code: str, message: str, hint: str | None = None, **headers: str) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if hint:
        body["hint"] = hint
    return JSONResponse({"error": body}, status_code=status, headers=headers or None)


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(EokError)
    async def _eok(request: Request, exc: EokError) -> JSONResponse:
        headers = {"WWW-Authenticate": 'Bearer realm="eok"'} if exc.http_status == 401 else {}
        return error_json(exc.http_status, error_code(exc), exc.message, exc.hint, **headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_json(422, "invalid_request", describe_validation(exc.errors()), "see /docs for the schema")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
        message = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        if exc.status_code == 404 and message == "Not Found":
            message = f"no such endpoint: {request.method} {request.url.path}"
        headers = dict(exc.headers or {})
        if exc.status_code == 400 and message == "There was an error parsing the body":
            # Undecodable bytes: the same kind of problem as malformed JSON, which FastAPI answers with 422.
            return error_json(422, "invalid_request", "the request body is not valid UTF-8 JSON", "send a JSON object")
        if exc.status_code == 405:
            allowed = allowed_methods(request)
            headers["Allow"] = ", ".join(allowed)
            message = f"{request.method} is not allowed on {request.url.path}; use {' or '.join(allowed)}"
        return error_json(exc.status_code, code, message, None, **headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        ref = uuid.uuid4().hex[:12]
        log.error("unexpected error %s on %s %s", ref, request.method, request.url.path, exc_info=exc)
        return error_json(
            500,
            "internal_error",
            f"an unexpected error occurred (reference {ref})",
            "the server log has the details under that reference",
        )


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on this path (Starlette's own 405 names only the first route's)."""
    allowed = []
    for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"):
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] == Match.FULL for route in request.app.router.routes):
            allowed.append(method)
    return allowed


def describe_validation(errors: Any) -> str:
    """One readable line per problem: where (query parameter, body field) and what is wrong."""
    parts = []
    for err in list(errors)[:5]:
        loc = [str(p) for p in err.get("loc", ())]
        where = {"query": "query parameter", "path": "path parameter", "body": "body field", "header": "header"}
        if loc and loc[0] in where:
            name = ".".join(loc[1:]) or "(the whole body)"
            place = f"{where[loc[0]]} {name!r}"
        else:
            place = ".".join(loc) or "request"
        parts.append(f"{place}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "the request is invalid"


class BodySizeLimit:
    """Refuse request bodies over `max_bytes` with 413 before any route reads them.

    The body is read here (it is small by construction) and replayed to the app, so a client that lies
    about Content-Length or streams chunks is caught too.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_json(
            413,
            "payload_too_large",
            f"the request body is larger than {self.max_bytes} bytes",
            "send a smaller body (queries and parameters fit well within the limit)",
        )
        await response(scope, receive, send)

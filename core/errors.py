"""Errors a user can act on. The CLI and the API turn these into one clear line, never a traceback."""

from __future__ import annotations


class EokError(Exception):
    """Base of every error meant for a person: `message` says what is wrong, `hint` how to fix it."""

    exit_code = 1
    http_status = 400

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InvalidInput(EokError):
    """A spec, record, query or argument that is malformed; the message names it."""

    exit_code = 2
    http_status = 422


class NotFound(EokError):
    http_status = 404


class Unavailable(EokError):
    """A service we depend on (Neo4j, an LLM endpoint, a board) cannot be reached."""

    exit_code = 3
    http_status = 503

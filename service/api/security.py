"""API keys and roles: reader < analyst < operator, from settings.api_keys (key -> role)."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from enum import IntEnum
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from core.errors import InvalidInput
from service.api.errors import Forbidden, Unauthorized


class Role(IntEnum):
    READER = 1  # read ideas, thoughts, experiences, runs
    ANALYST = 2  # + saved and ad-hoc read-only Cypher
    OPERATOR = 3  # + start and cancel runs

    @classmethod
    def parse(cls, text: str, where: str) -> Role:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise InvalidInput(
                f"{where}: role {text!r} is not one of reader, analyst, operator",
                'set EOK_API_KEYS to a JSON object of key -> role, e.g. \'{"s3cret": "analyst"}\'',
            ) from None


@dataclass(frozen=True)
class Caller:
    role: Role
    key_id: str  # a non-secret name for audit records and logs: a hash prefix (security.key_id)


def key_id(key: str) -> str:
    """A stable, non-secret name for a key (audit records, logs): a hash prefix, never the key's text."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:10]


class KeyRing:
    def __init__(self, keys: dict[str, str]) -> None:
        self._keys: list[tuple[bytes, Role]] = []
        for i, (key, role) in enumerate(keys.items()):
            if len(key) < 8:
                raise InvalidInput(
                    f"api_keys entry {i + 1} is shorter than 8 characters",
                    "use long random keys, e.g. `python -c 'import secrets; print(secrets.token_urlsafe(24))'`",
                )
            self._keys.append((key.encode(), Role.parse(role, f"api_keys entry {i + 1}")))

    def __len__(self) -> int:
        return len(self._keys)

    def identify(self, presented: str | None) -> Caller:
        if not presented:
            hint = (
                "send the key in the X-API-Key header or as `Authorization: Bearer <key>`"
                if self._keys
                else 'no keys are configured on this server: set EOK_API_KEYS=\'{"<key>": "operator"}\''
            )
            raise Unauthorized("this endpoint needs an API key", hint)
        given = presented.encode()
        role = None
        for key, key_role in self._keys:  # compare with every key, in constant time per key
            if hmac.compare_digest(key, given):
                role = key_role
        if role is None:
            raise Unauthorized("the API key is not valid", "check the key, or ask the operator of this server")
        return Caller(role, key_id(presented))


# Declared as security schemes so /docs offers "Authorize" and /openapi.json names them.
_header_scheme = APIKeyHeader(name="X-API-Key", auto_error=False, description="an API key from EOK_API_KEYS")
_bearer_scheme = HTTPBearer(auto_error=False, description="the same API key as a bearer token")


def _presented_key(
    header: Annotated[str | None, Depends(_header_scheme)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer_scheme)],
) -> str | None:
    return header or (bearer.credentials if bearer else None)


def require(minimum: Role):
    """A dependency that admits callers whose key has at least `minimum`."""

    def check(request: Request, presented: Annotated[str | None, Depends(_presented_key)]) -> Caller:
        caller = request.app.state.eok.keys.identify(presented)
        if caller.role < minimum:
            raise Forbidden(
                f"this endpoint needs the {minimum.name.lower()} role; the key has {caller.role.name.lower()}",
                "use a key with a higher role",
            )
        request.state.caller = caller
        return caller

    return check

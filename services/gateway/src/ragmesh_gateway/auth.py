"""Bearer-JWT authentication. Claims: `sub` (user), `department`, `roles` (list).

Production verifies RS256/ES256 tokens against the configured issuer's JWKS (PyJWT's PyJWKClient,
keys cached); local development signs HS256 tokens with a dev key (`python -m ragmesh_gateway.tokens`).
"""
from __future__ import annotations

import logging
from typing import Any

import anyio
import jwt
from fastapi import HTTPException, Request

from ragmesh_common.context import UserContext, validate_identifier

logger = logging.getLogger(__name__)


class Authenticator:
    def __init__(self, *, secret: str | None, issuer: str | None, audience: str | None, jwks_url: str | None) -> None:
        self._secret = secret
        self._issuer = issuer
        self._audience = audience
        self._jwks = jwt.PyJWKClient(jwks_url, cache_keys=True, timeout=5) if jwks_url else None

    def verify(self, token: str) -> UserContext:
        options: dict[str, Any] = {"require": ["sub", "exp"]}
        try:
            if self._jwks is not None:
                key = self._jwks.get_signing_key_from_jwt(token).key
                claims = jwt.decode(token, key, algorithms=["RS256", "ES256"], issuer=self._issuer,
                                    audience=self._audience, options=options)
            else:
                claims = jwt.decode(token, self._secret, algorithms=["HS256"], issuer=self._issuer,
                                    audience=self._audience, options=options)
        except jwt.PyJWTError as exc:
            raise HTTPException(401, f"invalid token: {exc}", headers={"WWW-Authenticate": "Bearer"}) from exc
        roles = claims.get("roles", [])
        if isinstance(roles, str):
            roles = [r for r in roles.split(",") if r]
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise HTTPException(401, "invalid token: roles must be a list of strings")
        department = claims.get("department", "")
        try:
            validate_identifier(str(claims["sub"]), "sub")
            for value in [*roles, *([department] if department else [])]:
                validate_identifier(value, "role/department")
        except ValueError as exc:
            raise HTTPException(401, f"invalid token: {exc}") from exc
        return UserContext(user_id=str(claims["sub"]), department=str(department), roles=tuple(roles))

    def __call__(self, request: Request) -> UserContext:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise HTTPException(401, "missing bearer token (Authorization: Bearer <jwt>)",
                                headers={"WWW-Authenticate": "Bearer"})
        return self.verify(token.strip())

    async def authenticate(self, request: Request) -> UserContext:
        """`self(request)` for async callers: on the event loop for a shared-secret (HS256) token, which is a
        few microseconds of CPU; in a worker thread with JWKS, whose key lookup may fetch over the network."""
        if self._jwks is None:
            return self(request)
        return await anyio.to_thread.run_sync(self, request)


def require_admin(user: UserContext) -> UserContext:
    if not user.is_admin:
        raise HTTPException(403, "admin role required")
    return user

"""Bearer-JWT authentication. Claims: `sub` (user), `department`, `roles` (list).

Production verifies RS256/ES256 tokens against the configured issuer's JWKS (PyJWT's PyJWKClient,
keys cached); local development signs HS256 tokens with a dev key (`ragmesh token`, `python -m ragmesh_cli.tokens`).

A client sends the same token with every request until it expires, so a verified token's user is kept
(at most `cache_size` tokens, each until its `exp` and for at most `cache_seconds`): PyJWT's decode was ~7%
of the gateway's CPU per search. A token is the exact string whose signature was checked, so a cached entry
proves nothing about any other string; an expired one is verified again, and fails.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import anyio
import jwt
from fastapi import HTTPException, Request

from ragmesh_common.identity import Signer, UserContext, validate_identifier

logger = logging.getLogger(__name__)


# What a caller is told about a refused token: a fixed sentence per failure class, never the JWT library's own
# text (its wording, the algorithms it tried or a key-fetch URL are internals). The detail goes to the log.
_REASONS: tuple[tuple[type[jwt.PyJWTError], str], ...] = (
    (jwt.ExpiredSignatureError, "the token has expired"),
    (jwt.ImmatureSignatureError, "the token is not valid yet"),
    (jwt.InvalidAudienceError, "the token is not meant for this service (audience)"),
    (jwt.InvalidIssuerError, "the token comes from an issuer this service does not trust"),
    (jwt.InvalidIssuedAtError, "the token's iat claim is not a valid time"),
    (jwt.MissingRequiredClaimError, "the token lacks a required claim (sub and exp are required)"),
    (jwt.InvalidSignatureError, "the token's signature does not verify"),
    (jwt.InvalidAlgorithmError, "the token is signed with an algorithm this service does not accept"),
    (jwt.PyJWKClientError, "the token's signing key is not known to this service"),
    (jwt.DecodeError, "the token is not a well-formed JWT"),
)


def public_reason(exc: jwt.PyJWTError) -> str:
    """The sentence a caller sees for a token PyJWT refused."""
    for kind, reason in _REASONS:
        if isinstance(exc, kind):
            return reason
    return "the token was refused"


def _unauthorized(reason: str) -> HTTPException:
    return HTTPException(401, f"invalid token: {reason}", headers={"WWW-Authenticate": "Bearer"})


class Authenticator:
    def __init__(
        self,
        *,
        secret: str | None,
        issuer: str | None,
        audience: str | None,
        jwks_url: str | None,
        cache_size: int = 4096,
        cache_seconds: float = 300.0,
        signer: Signer | None = None,
        clock: Callable[[], float] = time.time,  # epoch seconds, as `exp` is
    ) -> None:
        """`signer` signs the internal token of each hop for the users this authenticator returns."""
        self._signer = signer
        self._secret = secret
        self._issuer = issuer
        self._audience = audience
        self._jwks = jwt.PyJWKClient(jwks_url, cache_keys=True, timeout=5) if jwks_url else None
        self._cache_size = cache_size
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._verified: OrderedDict[str, tuple[UserContext, float]] = OrderedDict()  # token -> (user, valid until)
        self._lock = threading.Lock()  # verify also runs in worker threads (JWKS)

    def _cached(self, token: str) -> UserContext | None:
        with self._lock:
            entry = self._verified.get(token)
        if entry is not None and self._clock() < entry[1]:
            return entry[0]
        return None

    def verify(self, token: str) -> UserContext:
        user = self._cached(token)
        if user is not None:
            return user
        user, expires = self._verify(token)
        if self._cache_size > 0:
            with self._lock:
                self._verified[token] = (user, min(expires, self._clock() + self._cache_seconds))
                while len(self._verified) > self._cache_size:
                    self._verified.popitem(last=False)  # the oldest entry
        return user

    def _verify(self, token: str) -> tuple[UserContext, float]:
        """The token's user and its expiry (epoch seconds), or a 401."""
        # `exp` is checked below against self._clock (PyJWT would read the wall clock itself); `sub`'s type too, so
        # the caller is told which claim was wrong in our words
        options: jwt.types.Options = {"require": ["sub", "exp"], "verify_exp": False, "verify_sub": False}
        try:
            if self._jwks is not None:
                key = self._jwks.get_signing_key_from_jwt(token).key
                claims = jwt.decode(
                    token,
                    key,
                    algorithms=["RS256", "ES256"],
                    issuer=self._issuer,
                    audience=self._audience,
                    options=options,
                )
            else:
                assert self._secret is not None  # __init__ requires a secret when there is no JWKS
                claims = jwt.decode(
                    token,
                    self._secret,
                    algorithms=["HS256"],
                    issuer=self._issuer,
                    audience=self._audience,
                    options=options,
                )
        except jwt.PyJWTError as exc:
            logger.info("bearer token refused: %s: %s", type(exc).__name__, exc)
            raise _unauthorized(public_reason(exc)) from exc
        expires = claims["exp"]
        if isinstance(expires, bool) or not isinstance(expires, int | float):
            raise _unauthorized("exp must be a number")
        if expires <= self._clock():
            raise _unauthorized("the token has expired")
        roles = claims.get("roles", [])
        if isinstance(roles, str):
            roles = [r for r in roles.split(",") if r]
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise _unauthorized("roles must be a list of strings")
        department = claims.get("department", "")
        for claim, value in (("sub", claims["sub"]), ("department", department)):
            if not isinstance(value, str):  # a signed token may still carry any JSON type
                raise _unauthorized(f"{claim} must be a string, got a {type(value).__name__}")
        try:
            validate_identifier(claims["sub"], "sub")
            for value in [*roles, *([department] if department else [])]:
                validate_identifier(value, "role/department")
        except ValueError as exc:
            raise _unauthorized(str(exc)) from exc
        user = UserContext(
            user_id=str(claims["sub"]), department=str(department), roles=tuple(roles), signer=self._signer
        )
        return user, float(expires)

    @staticmethod
    def _token(request: Request) -> str:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HTTPException(
                401, "missing bearer token (Authorization: Bearer <jwt>)", headers={"WWW-Authenticate": "Bearer"}
            )
        return token.strip()

    def __call__(self, request: Request) -> UserContext:
        return self.verify(self._token(request))

    async def authenticate(self, request: Request) -> UserContext:
        """`self(request)` for async callers: on the event loop for a shared-secret (HS256) token, which needs
        no I/O, and for a token verified before; in a worker thread with JWKS, whose key lookup may fetch over
        the network."""
        token = self._token(request)
        if self._jwks is None:
            return self.verify(token)
        cached = self._cached(token)
        return cached if cached is not None else await anyio.to_thread.run_sync(self.verify, token)


def require_admin(user: UserContext) -> UserContext:
    if not user.is_admin:
        raise HTTPException(403, "admin role required")
    return user

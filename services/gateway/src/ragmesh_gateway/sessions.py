"""The dashboard's sign-in: an admin credential exchanged for a short-lived session cookie.

- `POST /api/v1/admin/session` with `{"token": "<an admin's bearer JWT>"}` (locally the dev token, `make token
  user=admin roles=admin`; in production any token the identity provider issued to an admin) sets the cookie;
  `GET /admin/oidc/login` does the same through the OIDC authorization-code flow (with PKCE) against
  GATEWAY_JWT_ISSUER, for GATEWAY_OIDC_CLIENT_ID.
- The cookie holds a session token (HS256, signed with GATEWAY_SESSION_KEY) naming the user, roles, department, a
  CSRF token and an expiry: GATEWAY_SESSION_SECONDS (default 900), never beyond the credential's own `exp`. It is
  `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's page sends it), `Path=/`, and `Secure` over
  HTTPS (GATEWAY_SESSION_COOKIE_SECURE forces it either way).
- CSRF: a request authenticated by the cookie that is not GET/HEAD/OPTIONS must carry the session's CSRF token in
  `X-CSRF-Token`; the page receives it in the JSON of the sign-in and of `GET /api/v1/admin/session` (no other
  origin can read that JSON) and keeps it in memory only. The sign-in itself takes JSON only (a cross-site form
  cannot send it without a preflight) and refuses a foreign `Origin`.
- No token in localStorage or in a URL: the dashboard never sees the session token.
- `DELETE /api/v1/admin/session` signs out (the cookie is cleared; the session token also stops working at once
  on this gateway: its id is kept as revoked until it would have expired).

Without GATEWAY_SESSION_KEY each gateway process makes a random key at start: sessions then end with the process
and do not work across replicas (a warning says so).
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import jwt
from fastapi import HTTPException, Request

from ragmesh_common.identity import Signer, UserContext

logger = logging.getLogger(__name__)

COOKIE = "ragmesh_admin_session"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_KIND = "ragmesh-admin-session"


@dataclass(frozen=True)
class Session:
    user: UserContext
    csrf: str
    expires: float
    session_id: str


class AdminSessions:
    """Issues and checks session tokens; `revoked` holds signed-out session ids until their expiry."""

    def __init__(
        self,
        key: str | None,
        seconds: float,
        *,
        secure: bool | None = None,
        signer: Signer | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not key:
            logger.warning(
                "GATEWAY_SESSION_KEY is not set: dashboard sessions use a random key of this process "
                "(they end with it and do not work across replicas)"
            )
        self._key = key or secrets.token_urlsafe(48)
        self.seconds = seconds
        self._secure = secure
        self._signer = signer
        self._clock = clock
        self._revoked: dict[str, float] = {}
        self._lock = threading.Lock()

    def issue(self, user: UserContext, not_after: float) -> tuple[str, Session]:
        """A session for `user` (an admin) until now + seconds, or `not_after` (the credential's expiry) if sooner."""
        expires = min(self._clock() + self.seconds, not_after)
        session = Session(user, secrets.token_urlsafe(32), expires, secrets.token_urlsafe(16))
        claims = {
            "typ": _KIND,
            "sub": user.user_id,
            "department": user.department,
            "roles": list(user.roles),
            "csrf": session.csrf,
            "sid": session.session_id,
            "exp": int(expires),
        }
        return jwt.encode(claims, self._key, algorithm="HS256"), session

    def read(self, token: str) -> Session:
        """The session a cookie holds, or 401."""
        try:
            claims = jwt.decode(
                token, self._key, algorithms=["HS256"], options={"require": ["exp", "sub", "sid", "csrf"]}
            )
        except jwt.PyJWTError as exc:
            raise HTTPException(401, "the dashboard session is invalid or expired; sign in again") from exc
        if claims.get("typ") != _KIND or float(claims["exp"]) <= self._clock():
            raise HTTPException(401, "the dashboard session is invalid or expired; sign in again")
        with self._lock:
            if claims["sid"] in self._revoked:
                raise HTTPException(401, "signed out; sign in again")
        roles = tuple(r for r in claims.get("roles", []) if isinstance(r, str))
        user = UserContext(str(claims["sub"]), str(claims.get("department", "")), roles, signer=self._signer)
        return Session(user, str(claims["csrf"]), float(claims["exp"]), str(claims["sid"]))

    def sign_state(self, claims: dict[str, object]) -> str:
        """The OIDC flow's pending state (state, PKCE verifier, exp), signed for its cookie."""
        return jwt.encode({**claims, "typ": "ragmesh-oidc-state"}, self._key, algorithm="HS256")

    def read_state(self, token: str) -> dict[str, object]:
        try:
            claims: dict[str, object] = jwt.decode(token, self._key, algorithms=["HS256"], options={"require": ["exp"]})
        except jwt.PyJWTError as exc:
            raise HTTPException(
                401, "the sign-in expired or did not start here; start again at /admin/oidc/login"
            ) from exc
        if claims.get("typ") != "ragmesh-oidc-state":
            raise HTTPException(401, "the sign-in did not start here; start again at /admin/oidc/login")
        return claims

    def revoke(self, session: Session) -> None:
        now = self._clock()
        with self._lock:
            self._revoked = {sid: until for sid, until in self._revoked.items() if until > now}
            self._revoked[session.session_id] = session.expires

    def user(self, request: Request, token: str) -> UserContext:
        """The cookie's user; a request that changes something must carry the session's CSRF token."""
        session = self.read(token)
        if request.method not in SAFE_METHODS:
            sent = request.headers.get(CSRF_HEADER, "")
            if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
                raise HTTPException(403, "missing or wrong X-CSRF-Token for a cookie-authenticated request")
        return session.user

    def secure(self, request: Request) -> bool:
        if self._secure is not None:
            return self._secure
        return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "") == "https"

    def cookie_options(self, request: Request, session: Session) -> dict[str, object]:
        return {
            "key": COOKIE,
            "max_age": max(1, int(session.expires - self._clock())),
            "httponly": True,
            "samesite": "strict",
            "secure": self.secure(request),
            "path": "/",
        }


def same_origin(request: Request) -> bool:
    """True when the request names no Origin, or this server's own (scheme, host and port as the client saw them)."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("x-forwarded-host") or request.headers.get("host", "")
    scheme = request.headers.get("x-forwarded-proto") or request.url.scheme
    return origin == f"{scheme}://{host}"

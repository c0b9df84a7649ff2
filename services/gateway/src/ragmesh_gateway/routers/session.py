"""The dashboard's sign-in and sign-out (sessions.py): a credential or the OIDC flow for a session cookie."""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import anyio
import httpx
import jwt
from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse

from ragmesh_gateway.auth import Authenticator, require_admin
from ragmesh_gateway.deps import User
from ragmesh_gateway.models import AdminLogin, AdminSession, SignedOut, error_responses
from ragmesh_gateway.sessions import COOKIE, AdminSessions, Session, same_origin
from ragmesh_gateway.validation import StrictJSONRoute

logger = logging.getLogger(__name__)

router = APIRouter(route_class=StrictJSONRoute)

OIDC_COOKIE = "ragmesh_oidc_state"
OIDC_SECONDS = 600  # the sign-in at the identity provider must finish within this
OIDC_TIMEOUT = 10.0  # seconds, each call to the identity provider


def _described(session: Session) -> dict[str, Any]:
    return {
        "user_id": session.user.user_id,
        "roles": list(session.user.roles),
        "csrf_token": session.csrf,
        "expires_at": datetime.fromtimestamp(session.expires, tz=UTC).isoformat(),
    }


async def _admin_from_token(request: Request, token: str) -> tuple[Any, float]:
    """The admin a bearer JWT names, and the JWT's expiry; 401 for a bad token, 403 for a non-admin."""
    authenticator: Authenticator = request.app.state.authenticator
    user = await anyio.to_thread.run_sync(authenticator.verify, token)
    require_admin(user)
    expires = float(jwt.decode(token, options={"verify_signature": False})["exp"])  # verified just above
    return user, expires


def _start_session(request: Request, response: Response, user: Any, not_after: float) -> dict[str, Any]:
    sessions: AdminSessions = request.app.state.sessions
    token, session = sessions.issue(user, not_after)
    response.set_cookie(value=token, **sessions.cookie_options(request, session))  # type: ignore[arg-type]
    response.headers["Cache-Control"] = "no-store"
    logger.info("dashboard session for %s until %s", user.user_id, _described(session)["expires_at"])
    return _described(session)


@router.post(
    "/api/v1/admin/session",
    tags=["admin"],
    summary="Sign in to the dashboard: an admin's bearer JWT for a short-lived HttpOnly session cookie",
    response_model=AdminSession,
    responses=error_responses(401, 403, 422),
)
async def sign_in(body: AdminLogin, request: Request, response: Response) -> Any:
    if not same_origin(request):
        raise HTTPException(403, "sign-in from another origin is refused")
    user, expires = await _admin_from_token(request, body.token.strip())
    return _start_session(request, response, user, expires)


@router.get(
    "/api/v1/admin/session",
    tags=["admin"],
    summary="The dashboard session of this cookie, with its CSRF token (401 without one)",
    response_model=AdminSession,
    responses=error_responses(401, 422),
)
async def current_session(request: Request, response: Response) -> Any:
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        raise HTTPException(401, "not signed in")
    sessions: AdminSessions = request.app.state.sessions
    response.headers["Cache-Control"] = "no-store"
    return _described(sessions.read(cookie))


@router.delete(
    "/api/v1/admin/session",
    tags=["admin"],
    summary="Sign out of the dashboard (the cookie's session ends; X-CSRF-Token required)",
    response_model=SignedOut,
    responses=error_responses(401, 403, 422),
)
async def sign_out(request: Request, user: User) -> Response:
    sessions: AdminSessions = request.app.state.sessions
    cookie = request.cookies.get(COOKIE)
    if cookie:
        sessions.revoke(sessions.read(cookie))  # `user` passed the CSRF check for this cookie
    response = JSONResponse({"user_id": user.user_id, "signed_out": True}, headers={"Cache-Control": "no-store"})
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict", secure=sessions.secure(request))
    logger.info("dashboard session of %s ended", user.user_id)
    return response


# ---------- OIDC (authorization code with PKCE) ----------


async def _discover(issuer: str) -> dict[str, Any]:
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        async with httpx.AsyncClient(timeout=OIDC_TIMEOUT) as client:
            reply = await client.get(url)
            reply.raise_for_status()
            found: dict[str, Any] = reply.json()
    except (httpx.HTTPError, ValueError) as exc:
        logger.error("OIDC discovery at %s failed: %s", url, exc)
        raise HTTPException(503, f"the identity provider's discovery failed ({type(exc).__name__})") from exc
    if not isinstance(found.get("authorization_endpoint"), str) or not isinstance(found.get("token_endpoint"), str):
        raise HTTPException(503, "the identity provider's discovery document names no authorization/token endpoint")
    return found


def _oidc(request: Request) -> tuple[str, str, str | None, str]:
    settings = request.app.state.settings
    if not settings.oidc_client_id or not settings.jwt_issuer:
        raise HTTPException(404, "OIDC sign-in is not configured (GATEWAY_OIDC_CLIENT_ID, GATEWAY_JWT_ISSUER)")
    return settings.jwt_issuer, settings.oidc_client_id, settings.oidc_client_secret, settings.oidc_scopes


def _callback_url(request: Request) -> str:
    return str(request.url_for("oidc_callback"))


@router.get("/admin/oidc/login", include_in_schema=False)
async def oidc_login(request: Request) -> RedirectResponse:
    issuer, client_id, _, scopes = _oidc(request)
    provider = await _discover(issuer)
    state, verifier, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(48), secrets.token_urlsafe(16)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": _callback_url(request),
        "scope": scopes,
        "state": state,
        "nonce": nonce,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    sessions: AdminSessions = request.app.state.sessions
    pending = sessions.sign_state({"state": state, "verifier": verifier, "exp": int(time.time()) + OIDC_SECONDS})
    response = RedirectResponse(f"{provider['authorization_endpoint']}?{urlencode(query)}", status_code=302)
    response.set_cookie(
        OIDC_COOKIE,
        pending,
        max_age=OIDC_SECONDS,
        httponly=True,
        samesite="lax",  # it must come back with the provider's top-level redirect
        secure=sessions.secure(request),
        path="/admin/oidc",
    )
    return response


@router.get("/admin/oidc/callback", include_in_schema=False, name="oidc_callback")
async def oidc_callback(request: Request, code: str = "", state: str = "", error: str = "") -> Response:
    issuer, client_id, client_secret, _ = _oidc(request)
    if error:
        raise HTTPException(401, f"the identity provider refused the sign-in: {error[:200]}")
    sessions: AdminSessions = request.app.state.sessions
    pending = sessions.read_state(request.cookies.get(OIDC_COOKIE, ""))
    if not code or not state or not secrets.compare_digest(state, str(pending.get("state", ""))):
        raise HTTPException(401, "the sign-in's state does not match; start again at /admin/oidc/login")
    provider = await _discover(issuer)
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": _callback_url(request),
        "client_id": client_id,
        "code_verifier": str(pending["verifier"]),
    }
    # a confidential client authenticates with its secret; a public one (no secret) with the PKCE verifier only
    auth: httpx.Auth = httpx.BasicAuth(client_id, client_secret) if client_secret else httpx.Auth()
    try:
        async with httpx.AsyncClient(timeout=OIDC_TIMEOUT) as client:
            reply = await client.post(provider["token_endpoint"], data=form, auth=auth)
            reply.raise_for_status()
            tokens = reply.json()
    except (httpx.HTTPError, ValueError) as exc:
        logger.error("OIDC code exchange failed: %s", exc)
        raise HTTPException(401, f"the identity provider did not exchange the code ({type(exc).__name__})") from exc
    # the access token is what the API accepts (issuer, audience, roles): the session is for its admin
    token = tokens.get("access_token") if isinstance(tokens, dict) else None
    if not isinstance(token, str):
        raise HTTPException(401, "the identity provider returned no access token")
    response = RedirectResponse("/admin", status_code=303)
    user, expires = await _admin_from_token(request, token)
    _start_session(request, response, user, expires)
    response.delete_cookie(OIDC_COOKIE, path="/admin/oidc")
    return response

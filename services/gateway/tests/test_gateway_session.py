"""The dashboard's sign-in: an admin's JWT exchanged for a short-lived HttpOnly, SameSite=Strict session cookie that
authenticates the admin API; requests that change something need the session's CSRF token; sign-out ends the
session at once; non-admins, bad tokens, other origins and form posts get no session."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).parent))  # the bad-input tests' fakes (tests run in importlib mode)
from test_gateway_bad_input import SECRET, FakeMesh, settings

from ragmesh_cli.tokens import mint
from ragmesh_gateway.app import create_app
from ragmesh_gateway.sessions import COOKIE


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[TestClient]:
    """A client with no Authorization header: what the dashboard's page is."""
    with TestClient(create_app(settings(tmp_path), mesh=FakeMesh()), raise_server_exceptions=False) as client:
        yield client


def sign_in(client: TestClient, token: str, **headers: str) -> object:
    return client.post("/api/v1/admin/session", json={"token": token}, headers=headers)


def test_an_admin_token_becomes_an_httponly_session_cookie(browser: TestClient) -> None:
    token = mint(SECRET, "root", "ops", ["admin"])
    reply = sign_in(browser, token)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["user_id"] == "root" and "admin" in body["roles"] and len(body["csrf_token"]) >= 32
    assert token not in reply.text  # the credential is not echoed
    cookie = reply.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    max_age = int(cookie.split("Max-Age=")[1].split(";")[0])
    assert 0 < max_age <= 900  # GATEWAY_SESSION_SECONDS' default
    assert reply.headers["cache-control"] == "no-store"
    # the cookie alone now authenticates the admin API, and the page can learn its CSRF token again
    assert browser.get("/api/v1/admin/cache").status_code == 200
    again = browser.get("/api/v1/admin/session")
    assert again.status_code == 200 and again.json()["csrf_token"] == body["csrf_token"]


def test_the_session_never_outlives_the_credential(browser: TestClient) -> None:
    reply = sign_in(browser, mint(SECRET, "root", "ops", ["admin"], ttl_s=120))
    assert reply.status_code == 200
    left = int(reply.headers["set-cookie"].split("Max-Age=")[1].split(";")[0])
    assert left <= 120


def test_changes_need_the_csrf_token_and_sign_out_ends_the_session(browser: TestClient) -> None:
    body = sign_in(browser, mint(SECRET, "root", "ops", ["admin"])).json()  # type: ignore[attr-defined]
    stolen = browser.cookies.get(COOKIE)
    refused = browser.delete("/api/v1/admin/session")
    assert refused.status_code == 403 and "X-CSRF-Token" in refused.text
    refused = browser.delete("/api/v1/admin/session", headers={"X-CSRF-Token": "wrong" * 8})
    assert refused.status_code == 403
    out = browser.delete("/api/v1/admin/session", headers={"X-CSRF-Token": body["csrf_token"]})
    assert out.status_code == 200 and out.json() == {"user_id": "root", "signed_out": True}
    assert f'{COOKIE}=""' in out.headers["set-cookie"] and "Max-Age=0" in out.headers["set-cookie"]
    assert browser.get("/api/v1/admin/cache").status_code == 401
    # the session token itself stops working, even replayed by someone who kept it
    replayed = browser.get("/api/v1/admin/cache", cookies={COOKIE: stolen})
    assert replayed.status_code == 401 and "signed out" in replayed.text


@pytest.mark.parametrize(
    ("token", "status"),
    [
        (mint(SECRET, "alice", "eng", ["employee"]), 403),  # a valid token, not an admin
        (mint("another-secret-which-is-long-enough-for-hs256", "root", "ops", ["admin"]), 401),
        ("not-a-jwt", 401),
        (mint(SECRET, "root", "ops", ["admin"], ttl_s=-10), 401),  # expired
    ],
)
def test_no_session_without_a_valid_admin_credential(browser: TestClient, token: str, status: int) -> None:
    reply = sign_in(browser, token)
    assert reply.status_code == status, reply.text
    assert "set-cookie" not in reply.headers
    assert browser.get("/api/v1/admin/cache").status_code == 401


def test_no_sign_in_from_another_origin_or_by_form(browser: TestClient) -> None:
    token = mint(SECRET, "root", "ops", ["admin"])
    assert sign_in(browser, token, Origin="https://evil.example").status_code == 403  # type: ignore[attr-defined]
    form = browser.post("/api/v1/admin/session", data={"token": token})
    assert form.status_code in (415, 422) and "set-cookie" not in form.headers
    assert sign_in(browser, token, Origin="http://testserver").status_code == 200  # type: ignore[attr-defined]


def test_a_forged_or_expired_cookie_is_refused(browser: TestClient, tmp_path: Path) -> None:
    import jwt

    forged = jwt.encode(
        {
            "typ": "ragmesh-admin-session",
            "sub": "root",
            "roles": ["admin"],
            "csrf": "x",
            "sid": "y",
            "exp": int(time.time()) + 600,
        },
        "guessed-key-which-is-long-enough-for-hs256",
        algorithm="HS256",
    )
    assert browser.get("/api/v1/admin/cache", cookies={COOKIE: forged}).status_code == 401
    assert browser.get("/api/v1/admin/session").status_code == 401


def test_oidc_sign_in_is_not_offered_unconfigured(browser: TestClient) -> None:
    reply = browser.get("/admin/oidc/login", follow_redirects=False)
    assert reply.status_code == 404 and "GATEWAY_OIDC_CLIENT_ID" in reply.text

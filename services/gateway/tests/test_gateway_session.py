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


# ---------- OIDC: the authorization code flow with PKCE against an identity provider ----------


class FakeProvider:
    """An OIDC identity provider on a local port: discovery, JWKS and a token endpoint that checks the PKCE
    verifier against the challenge the authorization request carried, then issues an RS256 access token."""

    def __init__(self, roles: list[str]) -> None:
        import base64
        import hashlib
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import parse_qs

        import jwt
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        public.update({"kid": "k1", "use": "sig", "alg": "RS256"})
        self.challenges: dict[str, str] = {}  # code -> the PKCE challenge of its authorization request
        self.exchanged: list[dict[str, list[str]]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def _json(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == "/.well-known/openid-configuration":
                    self._json(
                        200,
                        {
                            "issuer": provider.issuer,
                            "authorization_endpoint": f"{provider.issuer}/authorize",
                            "token_endpoint": f"{provider.issuer}/token",
                            "jwks_uri": f"{provider.issuer}/jwks",
                        },
                    )
                elif self.path == "/jwks":
                    self._json(200, {"keys": [public]})
                else:
                    self._json(404, {})

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                provider.exchanged.append(form)
                code, verifier = form.get("code", [""])[0], form.get("code_verifier", [""])[0]
                digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
                if provider.challenges.get(code) != digest:
                    self._json(400, {"error": "invalid_grant"})
                    return
                now = int(time.time())
                claims = {
                    "iss": provider.issuer,
                    "aud": "ragmesh",
                    "sub": "root",
                    "roles": roles,
                    "iat": now,
                    "exp": now + 300,
                }
                token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})
                self._json(200, {"access_token": token, "token_type": "Bearer", "expires_in": 300})

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def oidc_browser(tmp_path: Path, provider: FakeProvider) -> Iterator[TestClient]:
    config = settings(tmp_path).model_copy(
        update={
            "jwt_secret": None,
            "jwt_issuer": provider.issuer,
            "jwks_url": f"{provider.issuer}/jwks",
            "jwt_audience": "ragmesh",
            "oidc_client_id": "ragmesh-dashboard",
        }
    )
    with TestClient(create_app(config, mesh=FakeMesh()), raise_server_exceptions=False) as client:
        yield client
    provider.server.shutdown()


def authorize(browser: TestClient, provider: FakeProvider) -> dict[str, str]:
    """The dashboard's redirect to the provider, and the provider's consent: a code bound to the challenge."""
    from urllib.parse import parse_qs, urlsplit

    start = browser.get("/admin/oidc/login", follow_redirects=False)
    assert start.status_code == 302
    target = urlsplit(start.headers["location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == f"{provider.issuer}/authorize"
    query = {k: v[0] for k, v in parse_qs(target.query).items()}
    assert query["client_id"] == "ragmesh-dashboard" and query["response_type"] == "code"
    assert query["code_challenge_method"] == "S256" and query["redirect_uri"] == "http://testserver/admin/oidc/callback"
    assert "HttpOnly" in start.headers["set-cookie"]
    provider.challenges["the-code"] = query["code_challenge"]
    return query


def test_oidc_sign_in_gives_an_admin_a_session(tmp_path: Path) -> None:
    provider = FakeProvider(["admin"])
    for browser in oidc_browser(tmp_path, provider):
        query = authorize(browser, provider)
        back = browser.get(f"/admin/oidc/callback?code=the-code&state={query['state']}", follow_redirects=False)
        assert back.status_code == 303 and back.headers["location"] == "/admin", back.text
        assert provider.exchanged[-1]["client_id"] == ["ragmesh-dashboard"]
        session = browser.get("/api/v1/admin/session")
        assert session.status_code == 200 and session.json()["user_id"] == "root"
        assert browser.get("/api/v1/admin/cache").status_code == 200


def test_oidc_sign_in_refuses_a_forged_state_a_stolen_code_and_a_non_admin(tmp_path: Path) -> None:
    provider = FakeProvider(["employee"])
    for browser in oidc_browser(tmp_path, provider):
        query = authorize(browser, provider)
        forged = browser.get("/admin/oidc/callback?code=the-code&state=guessed", follow_redirects=False)
        assert forged.status_code == 401 and "state" in forged.text
        # a code whose challenge is not this sign-in's verifier: the provider refuses the exchange
        provider.challenges["the-code"] = "not-this-verifier"
        stolen = browser.get(f"/admin/oidc/callback?code=the-code&state={query['state']}", follow_redirects=False)
        assert stolen.status_code == 401
        query = authorize(browser, provider)
        employee = browser.get(f"/admin/oidc/callback?code=the-code&state={query['state']}", follow_redirects=False)
        assert employee.status_code == 403  # signed in at the provider, but not an admin
        assert browser.get("/api/v1/admin/session").status_code == 401

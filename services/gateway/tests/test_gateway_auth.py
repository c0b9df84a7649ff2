"""Bearer-JWT verification: claims become the user context; anything off is a 401."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from fastapi import HTTPException, Request

from ragmesh_gateway.auth import Authenticator
from ragmesh_gateway.tokens import mint

SECRET = "test-secret-which-is-long-enough-for-hs256"


def test_valid_token_gives_user_department_roles() -> None:
    auth = Authenticator(secret=SECRET, issuer=None, audience=None, jwks_url=None)
    user = auth.verify(mint(SECRET, "alice", "eng", ["employee", "admin"]))
    assert (user.user_id, user.department, user.roles, user.is_admin) == ("alice", "eng", ("employee", "admin"), True)


@pytest.mark.parametrize("token, message", [
    (mint("another-secret-of-sufficient-length-x", "alice"), "Signature"),
    (jwt.encode({"sub": "alice", "exp": int(time.time()) - 10}, SECRET, algorithm="HS256"), "expired"),
    (jwt.encode({"sub": "alice"}, SECRET, algorithm="HS256"), "exp"),
    (jwt.encode({"sub": "al ice", "exp": int(time.time()) + 60}, SECRET, algorithm="HS256"), "sub"),
    (jwt.encode({"sub": "alice", "roles": [1], "exp": int(time.time()) + 60}, SECRET, algorithm="HS256"), "roles"),
    ("not-a-jwt", "invalid token"),
])
def test_bad_tokens_are_rejected(token: str, message: str) -> None:
    auth = Authenticator(secret=SECRET, issuer=None, audience=None, jwks_url=None)
    with pytest.raises(HTTPException) as err:
        auth.verify(token)
    assert err.value.status_code == 401 and message in str(err.value.detail)


def test_issuer_is_enforced_when_configured() -> None:
    auth = Authenticator(secret=SECRET, issuer="https://sso.example.com", audience=None, jwks_url=None)
    with pytest.raises(HTTPException):
        auth.verify(mint(SECRET, "alice", issuer="https://evil.example.com"))
    assert auth.verify(mint(SECRET, "alice", issuer="https://sso.example.com")).user_id == "alice"


def _request(token: str | None) -> Request:
    """An HTTP request carrying `Bearer <token>`, or no Authorization header at all for None."""
    headers = [(b"authorization", f"Bearer {token}".encode())] if token is not None else []
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers})


async def test_jwks_tokens_are_verified_against_the_issuers_published_keys() -> None:
    """Production path: an RS256 token checked against a JWKS endpoint (served here on loopback); the key
    fetch runs in a worker thread, so the event loop keeps serving while it waits."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    key, other = (rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in range(2))
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    body = json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()
    fetch_threads: list[bool] = []

    class Keys(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Keys)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        auth = Authenticator(secret=None, issuer="https://sso.example.com", audience=None,
                             jwks_url=f"http://127.0.0.1:{server.server_port}/keys")
        fetch = auth._jwks.fetch_data  # record which thread fetches the keys

        def recorded() -> object:
            fetch_threads.append(threading.current_thread() is threading.main_thread())
            return fetch()

        auth._jwks.fetch_data = recorded
        claims = {"sub": "alice", "department": "eng", "roles": ["employee"], "iss": "https://sso.example.com",
                  "exp": int(time.time()) + 60}
        good = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})
        user = await auth.authenticate(_request(good))
        assert (user.user_id, user.department, user.roles) == ("alice", "eng", ("employee",))
        forged = jwt.encode(claims, other, algorithm="RS256", headers={"kid": "k1"})
        with pytest.raises(HTTPException) as err:
            await auth.authenticate(_request(forged))
        assert err.value.status_code == 401 and "Signature" in str(err.value.detail)
        assert fetch_threads and not any(fetch_threads)  # fetched from the endpoint, off the event loop's thread
    finally:
        server.shutdown()


async def test_a_missing_bearer_token_is_a_401_on_the_async_path() -> None:
    auth = Authenticator(secret=SECRET, issuer=None, audience=None, jwks_url=None)
    with pytest.raises(HTTPException) as err:
        await auth.authenticate(_request(None))
    assert err.value.status_code == 401 and "missing bearer token" in str(err.value.detail)
    assert (await auth.authenticate(_request(mint(SECRET, "bob")))).user_id == "bob"

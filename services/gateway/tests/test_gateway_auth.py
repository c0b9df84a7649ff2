"""Bearer-JWT verification: claims become the user context; anything off is a 401."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from fastapi import HTTPException, Request

from ragmesh_cli.tokens import mint
from ragmesh_gateway.auth import Authenticator

SECRET = "test-secret-which-is-long-enough-for-hs256"


def test_valid_token_gives_user_department_roles() -> None:
    auth = Authenticator(secret=SECRET, issuer=None, audience=None, jwks_url=None)
    user = auth.verify(mint(SECRET, "alice", "eng", ["employee", "admin"]))
    assert (user.user_id, user.department, user.roles, user.is_admin) == ("alice", "eng", ("employee", "admin"), True)


@pytest.mark.parametrize(
    "token, message",
    [
        (mint("another-secret-of-sufficient-length-x", "alice"), "signature does not verify"),
        (jwt.encode({"sub": "alice", "exp": int(time.time()) - 10}, SECRET, algorithm="HS256"), "expired"),
        (jwt.encode({"sub": "alice"}, SECRET, algorithm="HS256"), "exp"),
        (jwt.encode({"sub": "al ice", "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256"), "sub"),
        (
            jwt.encode({"sub": "alice", "roles": [1], "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256"),
            "roles",
        ),
        ("not-a-jwt", "not a well-formed JWT"),
        # signed tokens whose claims have the wrong JSON type (a list department was a 500)
        (
            jwt.encode(
                {"sub": "alice", "department": ["eng", "hr"], "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256"
            ),
            "department must be a string",
        ),
        (
            jwt.encode({"sub": "alice", "department": {"a": 1}, "exp": int(time.time()) + 3600}, SECRET, "HS256"),
            "department must be a string",
        ),
        (jwt.encode({"sub": 42, "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256"), "must be a string"),
        (jwt.encode({"sub": ["alice"], "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256"), "must be a string"),
    ],
)
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
        auth = Authenticator(
            secret=None,
            issuer="https://sso.example.com",
            audience=None,
            jwks_url=f"http://127.0.0.1:{server.server_port}/keys",
        )
        fetch = auth._jwks.fetch_data  # record which thread fetches the keys

        def recorded() -> object:
            fetch_threads.append(threading.current_thread() is threading.main_thread())
            return fetch()

        auth._jwks.fetch_data = recorded
        claims = {
            "sub": "alice",
            "department": "eng",
            "roles": ["employee"],
            "iss": "https://sso.example.com",
            "exp": int(time.time()) + 3600,
        }
        good = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})
        user = await auth.authenticate(_request(good))
        assert (user.user_id, user.department, user.roles) == ("alice", "eng", ("employee",))
        forged = jwt.encode(claims, other, algorithm="RS256", headers={"kid": "k1"})
        with pytest.raises(HTTPException) as err:
            await auth.authenticate(_request(forged))
        assert err.value.status_code == 401 and "signature does not verify" in str(err.value.detail)
        assert fetch_threads and not any(fetch_threads)  # fetched from the endpoint, off the event loop's thread
    finally:
        server.shutdown()


async def test_a_missing_bearer_token_is_a_401_on_the_async_path() -> None:
    auth = Authenticator(secret=SECRET, issuer=None, audience=None, jwks_url=None)
    with pytest.raises(HTTPException) as err:
        await auth.authenticate(_request(None))
    assert err.value.status_code == 401 and "missing bearer token" in str(err.value.detail)
    assert (await auth.authenticate(_request(mint(SECRET, "bob")))).user_id == "bob"


def _count_decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    decode = jwt.decode

    def counted(token: str, *args: object, **kwargs: object) -> object:
        calls.append(token)
        return decode(token, *args, **kwargs)

    monkeypatch.setattr(jwt, "decode", counted)
    return calls


def test_a_verified_token_is_not_decoded_again_until_it_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    decodes = _count_decodes(monkeypatch)
    now = [time.time()]
    auth = Authenticator(secret=SECRET, issuer=None, audience=None, jwks_url=None, clock=lambda: now[0])
    expires = int(now[0]) + 2
    token = jwt.encode(
        {"sub": "alice", "department": "eng", "roles": ["employee"], "exp": expires}, SECRET, algorithm="HS256"
    )
    assert auth.verify(token).user_id == "alice"
    assert auth.verify(token).roles == ("employee",)
    assert len(decodes) == 1
    now[0] = expires  # past its exp the token is verified again, and fails as expired
    with pytest.raises(HTTPException) as err:
        auth.verify(token)
    assert err.value.status_code == 401 and "expired" in str(err.value.detail) and len(decodes) == 2


def test_the_token_cache_is_bounded_in_size_and_time(monkeypatch: pytest.MonkeyPatch) -> None:
    decodes = _count_decodes(monkeypatch)
    now = [time.time()]
    auth = Authenticator(
        secret=SECRET, issuer=None, audience=None, jwks_url=None, cache_size=2, cache_seconds=60, clock=lambda: now[0]
    )
    alice, bob, carol = (mint(SECRET, name) for name in ("alice", "bob", "carol"))
    for token in (alice, bob, carol, carol, bob, alice):  # carol's entry pushed alice's out
        auth.verify(token)
    assert decodes == [alice, bob, carol, alice]
    now[0] += 61  # within the tokens' exp, past cache_seconds
    auth.verify(alice)
    assert decodes[-1] == alice and len(decodes) == 5


@pytest.mark.parametrize("exp", ["tomorrow", None, True, [1]])
def test_a_token_whose_exp_is_not_a_number_is_401(exp: object) -> None:
    auth = Authenticator(secret=SECRET, issuer=None, audience=None, jwks_url=None)
    token = jwt.encode({"sub": "alice", "exp": exp}, SECRET, algorithm="HS256")
    with pytest.raises(HTTPException) as err:
        auth.verify(token)
    assert err.value.status_code == 401


def test_a_cached_token_proves_nothing_about_another_string() -> None:
    auth = Authenticator(secret=SECRET, issuer=None, audience=None, jwks_url=None)
    good = mint(SECRET, "alice", "eng", ["employee"])
    auth.verify(good)
    header, _payload, signature = good.split(".")
    forged_claims = jwt.encode(
        {"sub": "alice", "roles": ["admin"], "exp": int(time.time()) + 3600}, "x" * 32, algorithm="HS256"
    ).split(".")[1]
    with pytest.raises(HTTPException) as err:
        auth.verify(f"{header}.{forged_claims}.{signature}")
    assert err.value.status_code == 401


@pytest.mark.parametrize(
    "token, options",
    [
        ("not-a-jwt", {}),
        ("a.b.c", {}),
        (jwt.encode({"sub": "alice", "exp": int(time.time()) + 60, "aud": "other"}, SECRET, algorithm="HS256"), {}),
        (jwt.encode({"sub": "alice", "exp": int(time.time()) + 60, "iss": "evil"}, SECRET, algorithm="HS256"), {}),
        (jwt.encode({"sub": "alice", "exp": int(time.time()) + 60}, SECRET, algorithm="HS512"), {}),
        (jwt.encode({"sub": "alice", "exp": int(time.time()) + 60, "nbf": int(time.time()) + 3600}, SECRET), {}),
    ],
)
def test_a_refused_token_is_told_in_our_words_not_the_jwt_librarys(token: str, options: dict[str, str]) -> None:
    """A 401 says which kind of failure it was in a fixed sentence; PyJWT's own wording ("Not enough segments",
    "Invalid audience", "The specified alg value is not allowed", ...) is an internal and stays in the log."""
    auth = Authenticator(secret=SECRET, issuer="ragmesh", audience="ragmesh-api", jwks_url=None)
    with pytest.raises(HTTPException) as err:
        auth.verify(token)
    detail = str(err.value.detail)
    assert err.value.status_code == 401 and detail.startswith("invalid token: the token")
    for internal in ("segments", "Invalid", "alg value", "Audience", "padding", "utf-8", "Expecting"):
        assert internal not in detail, detail
    assert err.value.headers == {"WWW-Authenticate": "Bearer"}

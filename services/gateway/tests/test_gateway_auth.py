"""Bearer-JWT verification: claims become the user context; anything off is a 401."""
from __future__ import annotations

import time

import jwt
import pytest
from fastapi import HTTPException

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

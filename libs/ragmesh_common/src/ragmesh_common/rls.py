"""The signed identity assertion that PostgreSQL's row-level security trusts.

A transaction reaches an RLS identity only through `rag_set_identity` (services/retriever/.../sql/schema.sql),
which checks an RFC 2104 HMAC-SHA256, made here with the RLS key, over the user, department, roles, an expiry
and the pid of the database connection it is for. The key is the retriever's RETRIEVER_RLS_KEY (and the
gateway's GATEWAY_TRACES_RLS_KEY, for the admin traces reads); the database keeps its own copy, which only the
schema owner reads. Someone holding only the application DSN cannot make an assertion, and one seen in transit
is good for one connection and for at most `ASSERTION_TTL_SECONDS`.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Sequence

# One statement, bound parameters (never in the query text that pg_stat_activity shows).
SET_IDENTITY = "SELECT rag_set_identity(%s, %s, %s, %s, %s)"
ASSERTION_TTL_SECONDS = 60  # the database refuses more than 600
MIN_KEY_LENGTH = 32
_FIELD, _ROLE = "\x1f", "\x1e"


def check_key(key: str | None, name: str) -> str:
    """The key, or ValueError naming the setting when it is missing or too short to resist guessing."""
    if not key or len(key) < MIN_KEY_LENGTH:
        raise ValueError(f"{name} must be a secret of at least {MIN_KEY_LENGTH} characters")
    return key


def assertion(
    key: str,
    user_id: str,
    department: str,
    roles: Sequence[str],
    backend_pid: int,
    *,
    now: float | None = None,
    ttl: int = ASSERTION_TTL_SECONDS,
) -> tuple[str, str, list[str], int, str]:
    """The parameters of SET_IDENTITY for this user on the connection whose backend is `backend_pid`."""
    expires = int(now if now is not None else time.time()) + ttl
    message = _FIELD.join(
        ("ragmesh-rls-assertion", user_id, department, _ROLE.join(roles), str(expires), str(backend_pid))
    )
    mac = hmac.new(key.encode(), message.encode(), hashlib.sha256).hexdigest()
    return user_id, department, list(roles), expires, mac

"""Mints a local development JWT for a user (HS256 with GATEWAY_JWT_SECRET, or the dev stack's key): what
`ragmesh token` and `make token` print. A tool of the CLI (the top floor), not of the gateway, which only
verifies tokens.

ragmesh token --user alice --department eng --roles employee
make token user=alice department=eng roles=employee,admin
"""

from __future__ import annotations

import time
from pathlib import Path

import jwt


def mint(
    secret: str,
    user: str,
    department: str = "",
    roles: list[str] | None = None,
    ttl_s: int = 8 * 3600,
    issuer: str | None = None,
) -> str:
    now = int(time.time())
    claims: dict[str, object] = {
        "sub": user,
        "department": department,
        "roles": roles or [],
        "iat": now,
        "exp": now + ttl_s,
    }
    if issuer:
        claims["iss"] = issuer
    return jwt.encode(claims, secret, algorithm="HS256")


def dev_secret(data_dir: Path) -> str:
    """The dev stack's signing key (created by `make run` in the data folder)."""
    path = data_dir / "jwt-dev-secret"
    if not path.exists():
        raise SystemExit(
            f"no dev signing key at {path}: start the stack once with `make run`, or set GATEWAY_JWT_SECRET"
        )
    return path.read_text().strip()

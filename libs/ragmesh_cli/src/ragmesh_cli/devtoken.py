"""Mints a local development JWT for a user (HS256 with GATEWAY_JWT_SECRET, or the dev stack's key): the
claims the gateway's authenticator reads (`sub`, `department`, `roles`, `exp`). A tool, so it lives with the CLI
(`ragmesh token`), not in the gateway.

python -m ragmesh_cli.devtoken --user alice --department eng --roles employee
make token user=alice department=eng roles=employee,admin
"""

from __future__ import annotations

import argparse
import os
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


def main() -> None:
    parser = argparse.ArgumentParser(description="mint a local development JWT")
    parser.add_argument("--user", required=True)
    parser.add_argument("--department", default="")
    parser.add_argument("--roles", default="", help="comma-separated, e.g. employee,admin")
    parser.add_argument("--ttl", type=int, default=8 * 3600, help="lifetime in seconds")
    parser.add_argument("--data-dir", default=os.environ.get("RAGMESH_DATA_DIR", ".data"))
    args = parser.parse_args()
    if not args.user.strip():
        raise SystemExit("--user is required (make token user=alice department=eng)")
    secret = os.environ.get("GATEWAY_JWT_SECRET") or dev_secret(Path(args.data_dir))
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    print(mint(secret, args.user, args.department, roles, args.ttl))


if __name__ == "__main__":
    main()

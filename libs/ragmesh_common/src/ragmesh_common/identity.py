"""Who a request is for: the user context every service reads, and the metadata that names it to the next hop.

This is the leaf of the identity layers (it imports neither gRPC nor the token crypto):

- `ragmesh_common.identity` (here): `UserContext`, `current_user`, identifier rules, the `Signer` protocol;
- `ragmesh_common.tokens`: the Ed25519 token crypto (`TokenSigner`, `TokenVerifier`), no gRPC;
- `ragmesh_common.context`: the gRPC server interceptor that verifies a token into `current_user`;
- `ragmesh_common.testing`: a local key pair and channels that call as one user (tests and benches only).

A user that came in with a verified token (a service's caller) forwards that token. A user the gateway or the
ingestion worker acts for carries the process's signer, handed to it where the user is made (the gateway's
authenticator, the worker's task): there is no process-wide signer.
"""

from __future__ import annotations

import contextvars
import dataclasses
import re
from dataclasses import dataclass, field
from typing import Protocol

IDENTITY_KEY = "x-rag-identity"

IDENTIFIER_MAX_CHARS = 128
# A user, department or role name: the token claims and the ACL entries that must match them.
IDENTIFIER_PATTERN = rf"^[A-Za-z0-9_.@:\-]{{1,{IDENTIFIER_MAX_CHARS}}}$"
_IDENT = re.compile(IDENTIFIER_PATTERN)


class Signer(Protocol):
    """Signs a user's internal identity token (`ragmesh_common.tokens.TokenSigner`)."""

    def token(self, user: UserContext) -> str: ...


class NoIdentity(RuntimeError):
    """A user with neither a token to forward nor a signer was about to be named to another service."""


@dataclass(frozen=True)
class UserContext:
    user_id: str
    department: str = ""
    roles: tuple[str, ...] = field(default_factory=tuple)
    # The verified token this user arrived with (services); forwarded as is to the next hop.
    token: str = field(default="", repr=False, compare=False)
    # Who signs a token for this user when it has none (the gateway's and the worker's signer).
    signer: Signer | None = field(default=None, repr=False, compare=False)

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles

    def signed_by(self, signer: Signer) -> UserContext:
        """This user, with `signer` to sign the tokens of its calls."""
        return dataclasses.replace(self, signer=signer)

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Call metadata naming this user to the next service: the token the request arrived with, or one from
        the user's signer (cached per user, so this is a dictionary lookup on the hot path)."""
        token = self.token
        if not token:
            if self.signer is None:
                raise NoIdentity(
                    f"user {self.user_id!r} has no internal identity token and no signer: the gateway and the "
                    "worker sign with RAGMESH_INTERNAL_SIGNING_KEY (ragmesh_common.tokens.TokenSigner)"
                )
            token = self.signer.token(self)
        return ((IDENTITY_KEY, token),)


def validate_identifier(value: str, what: str) -> str:
    if not _IDENT.match(value):
        raise ValueError(
            f"{what} must be 1-{IDENTIFIER_MAX_CHARS} characters of letters, digits, _ . @ : -; got {value!r}"
        )
    return value


current_user: contextvars.ContextVar[UserContext | None] = contextvars.ContextVar("current_user", default=None)

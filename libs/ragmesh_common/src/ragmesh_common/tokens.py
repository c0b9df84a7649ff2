"""Internal identity tokens: what proves, on every gRPC hop, which user a call is for.

The gateway (and the ingestion worker, acting for the uploader) signs a short-lived JWT per user —
`sub`, `department`, `roles`, `iat`, `exp` (2 minutes by default), `aud` "ragmesh-internal", `iss`
"ragmesh-gateway", `act` {"sub": "gateway" | "ingest-worker"} (RFC 8693's actor: who signed on the user's
behalf) — and every service verifies it (`ragmesh_common.context.UserContextInterceptor`). This module is the
crypto only (no gRPC): the signer is built once by the process that signs and handed to whoever names users
to other services (`UserContext.signed_by`); `ragmesh_common.testing` makes a local key pair for tests.

Ed25519 (JWS `EdDSA`), not HS256: services hold only the PUBLIC key (RAGMESH_INTERNAL_PUBLIC_KEY), and only
the gateway and the worker hold the private one (RAGMESH_INTERNAL_SIGNING_KEY). With a shared HMAC secret
every service could mint a token for any user, so one compromised pod — the parser, which runs Docling on
untrusted uploads, is the likeliest — would be every user. Ed25519 signatures are small and deterministic
(no nonce to get wrong, unlike ECDSA), and both ends cache: the signer reuses a user's token for three
quarters of its lifetime and a verifier keeps a verified token until it expires, so the query path pays a
dictionary lookup per hop, not a signature.

Keys are PEM (`openssl genpkey -algorithm ed25519`, `openssl pkey -pubout`). A verifier accepts several
public keys (concatenated PEM blocks), picked by the token's `kid` (a hash of the public key): rotate by
adding the new public key everywhere, then switching the signers, then removing the old key.

Per-caller keys (RAGMESH_INTERNAL_CALLER_KEYS): a service-to-service caller that is not the gateway (a batch
job, a client in another language) holds a key of its own, registered with the services it may call. Its
tokens have `iss` = the caller's name and `aud` = the services they are for (`ragmesh-<service>`, a list when a
call is forwarded, e.g. retriever → embedder); a service takes such a token only when its own audience is in
`aud` and every audience in `aud` is one the key is registered for. So a caller key cannot mint a token for a
service it was not allowed, nor the gateway's `ragmesh-internal` token that every service takes.
The protocol is written out for non-Python callers in proto/README.md ("Calling a service").
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ragmesh_common.config import ConfigError, env_int
from ragmesh_common.identity import UserContext, validate_identifier

AUDIENCE = "ragmesh-internal"
ISSUER = "ragmesh-gateway"
ALGORITHM = "EdDSA"
SIGNING_KEY_ENV = "RAGMESH_INTERNAL_SIGNING_KEY"
PUBLIC_KEY_ENV = "RAGMESH_INTERNAL_PUBLIC_KEY"
TTL_ENV = "RAGMESH_INTERNAL_TOKEN_TTL_SECONDS"
CALLER_KEYS_ENV = "RAGMESH_INTERNAL_CALLER_KEYS"
SERVICE_AUDIENCE_PREFIX = "ragmesh-"
DEFAULT_TTL_SECONDS = 120
MIN_TTL_SECONDS, MAX_TTL_SECONDS = 30, 900
LEEWAY_SECONDS = 10  # clock skew between pods
REUSE_FRACTION = 0.75  # a signer hands out the same token until this much of its lifetime has passed

_PEM_BLOCK = "-----END PUBLIC KEY-----"


class InvalidToken(Exception):
    """The token is missing, malformed, forged, expired or meant for someone else."""


def _identity_claims(claims: dict[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    """A verified token's user: `sub`, `department` and `roles`, each a valid identifier, else InvalidToken (a
    signed token may still carry any JSON type)."""
    roles, department = claims.get("roles", []), claims.get("department", "")
    if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles) or not isinstance(department, str):
        raise InvalidToken("roles must be a list of strings and department a string")
    sub = str(claims["sub"])
    try:
        validate_identifier(sub, "sub")
        for value in [*roles, *([department] if department else [])]:
            validate_identifier(value, "role/department")
    except ValueError as exc:
        raise InvalidToken(str(exc)) from None
    return sub, department, tuple(roles)


def key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.urlsafe_b64encode(hashlib.sha256(raw).digest()[:12]).decode().rstrip("=")


def generate_keypair() -> tuple[str, str]:
    """A new Ed25519 key pair as PEM text: (private key, public key)."""
    private = Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private_pem, public_pem


def load_signing_key(pem: str, what: str = SIGNING_KEY_ENV) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(pem.strip().encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"{what} must be an Ed25519 private key in PEM (openssl genpkey -algorithm ed25519): {exc}"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"{what} must be an Ed25519 private key, got {type(key).__name__}")
    return key


def load_public_keys(pem: str, what: str = PUBLIC_KEY_ENV) -> dict[str, Ed25519PublicKey]:
    """Every public key in `pem` (one or more PEM blocks), by key id."""
    keys: dict[str, Ed25519PublicKey] = {}
    for block in pem.split(_PEM_BLOCK):
        if not block.strip():
            continue
        try:
            key = serialization.load_pem_public_key((block.strip() + "\n" + _PEM_BLOCK + "\n").encode())
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{what} must hold Ed25519 public keys in PEM (openssl pkey -pubout): {exc}") from None
        if not isinstance(key, Ed25519PublicKey):
            raise ConfigError(f"{what} must hold Ed25519 public keys, got {type(key).__name__}")
        keys[key_id(key)] = key
    if not keys:
        raise ConfigError(f"{what} holds no public key")
    return keys


def service_audience(service: str) -> str:
    """The audience of one service in a caller's token: `ragmesh-<service>` (e.g. ragmesh-retriever)."""
    return f"{SERVICE_AUDIENCE_PREFIX}{service}"


@dataclass(frozen=True)
class CallerKey:
    """A service-to-service caller's own public key and the audiences (services) its tokens may name."""

    caller: str
    key: Ed25519PublicKey
    audiences: frozenset[str]


def load_caller_keys(raw: str, what: str = CALLER_KEYS_ENV) -> dict[str, CallerKey]:
    """The caller key registry, by key id: a JSON list of {"caller", "public_key" (PEM), "audiences"}."""
    try:
        entries = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} must be a JSON list of caller keys: {exc}") from None
    if not isinstance(entries, list):
        raise ConfigError(f'{what} must be a JSON list of {{"caller", "public_key", "audiences"}} objects')
    registry: dict[str, CallerKey] = {}
    for i, entry in enumerate(entries):
        where = f"{what}[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"caller", "public_key", "audiences"}:
            raise ConfigError(f"{where} must have exactly the keys caller, public_key and audiences")
        caller, pem, audiences = entry["caller"], entry["public_key"], entry["audiences"]
        if not isinstance(caller, str) or not isinstance(pem, str):
            raise ConfigError(f"{where}: caller and public_key must be strings")
        try:
            validate_identifier(caller, "caller")
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if caller == ISSUER:
            raise ConfigError(f"{where}: the caller name {ISSUER!r} is the gateway's")
        if (
            not isinstance(audiences, list)
            or not audiences
            or not all(isinstance(a, str) and a.startswith(SERVICE_AUDIENCE_PREFIX) for a in audiences)
        ):
            raise ConfigError(f"{where}: audiences must be a non-empty list of {SERVICE_AUDIENCE_PREFIX}<service>")
        keys = load_public_keys(pem, f"{where}.public_key")
        if len(keys) != 1:
            raise ConfigError(f"{where}.public_key must hold exactly one key")
        ((kid, key),) = keys.items()
        if kid in registry:
            raise ConfigError(f"{where}: this key is registered twice")
        registry[kid] = CallerKey(caller, key, frozenset(audiences))
    return registry


def _required_env(name: str, who: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise ConfigError(f"environment variable {name} is required but not set ({who})")
    return value


class TokenSigner:
    """Signs internal tokens; one token per user is reused for most of its lifetime (bounded cache)."""

    def __init__(
        self,
        private_key: Ed25519PrivateKey,
        *,
        actor: str,
        ttl_seconds: int = DEFAULT_TTL_SECONDS,
        cache_size: int = 4096,
        clock: Callable[[], float] = time.time,
        issuer: str = ISSUER,
        audience: str | list[str] = AUDIENCE,
    ) -> None:
        """The gateway's and the worker's signer by default; a per-caller key's with `issuer` = the caller's
        registered name and `audience` = the `service_audience`s of the services it calls."""
        if not MIN_TTL_SECONDS <= ttl_seconds <= MAX_TTL_SECONDS:
            raise ConfigError(f"{TTL_ENV} must be within {MIN_TTL_SECONDS}..{MAX_TTL_SECONDS}, got {ttl_seconds}")
        self._key = private_key
        self._kid = key_id(private_key.public_key())
        self.actor = actor
        self.issuer = issuer
        self.audience = audience
        self.ttl = ttl_seconds
        self._cache_size = cache_size
        self._clock = clock
        self._tokens: OrderedDict[tuple[str, str, tuple[str, ...]], tuple[str, float]] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, actor: str) -> TokenSigner:
        """The signer of the gateway or the worker: RAGMESH_INTERNAL_SIGNING_KEY (required), ..._TTL_SECONDS."""
        pem = _required_env(SIGNING_KEY_ENV, f"the {actor} signs internal identity tokens with it")
        return cls(load_signing_key(pem), actor=actor, ttl_seconds=env_int(TTL_ENV, DEFAULT_TTL_SECONDS))

    @property
    def public_key_pem(self) -> str:
        return (
            self._key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode()
        )

    def token(self, user: UserContext) -> str:
        key = (user.user_id, user.department, tuple(user.roles))
        now = self._clock()
        with self._lock:
            cached = self._tokens.get(key)
            if cached is not None and now < cached[1]:
                self._tokens.move_to_end(key)
                return cached[0]
        token = self.mint(user, now)
        with self._lock:
            self._tokens[key] = (token, now + self.ttl * REUSE_FRACTION)
            self._tokens.move_to_end(key)
            while len(self._tokens) > self._cache_size:
                self._tokens.popitem(last=False)
        return token

    def mint(self, user: UserContext, now: float | None = None, **overrides: Any) -> str:
        """A fresh token for `user` (no cache); `overrides` replace claims (tests: expired, wrong audience)."""
        issued = int(self._clock() if now is None else now)
        claims: dict[str, Any] = {
            "sub": user.user_id,
            "department": user.department,
            "roles": list(user.roles),
            "iat": issued,
            "exp": issued + self.ttl,
            "aud": self.audience,
            "iss": self.issuer,
            "act": {"sub": self.actor},
        }
        claims.update(overrides)
        return jwt.encode(claims, self._key, algorithm=ALGORITHM, headers={"kid": self._kid})


def signing_key_of(token: str, keys: dict[str, Ed25519PublicKey]) -> Ed25519PublicKey:
    """The trusted key named by the token's `kid`, or InvalidToken (malformed, or a key not trusted here)."""
    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.PyJWTError as exc:
        raise InvalidToken(f"malformed token: {exc}") from None
    key = keys.get(kid) if isinstance(kid, str) else None
    if key is None:
        raise InvalidToken(f"token signed with an unknown key (kid {kid!r})")
    return key


class TokenVerifier:
    """Verifies internal tokens against the trusted public keys; verified tokens are kept until they expire."""

    def __init__(
        self,
        public_keys: dict[str, Ed25519PublicKey],
        *,
        callers: dict[str, CallerKey] | None = None,
        audience: str | None = None,
        leeway: float = LEEWAY_SECONDS,
        cache_size: int = 4096,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`public_keys`: the gateway's and the worker's (any user, any service). `callers`: per-caller keys,
        taken only for a token whose `aud` holds `audience` (this service's, `service_audience(name)`)."""
        if not public_keys:
            raise ConfigError("a token verifier needs at least one public key")
        self._keys = dict(public_keys)
        self._callers = dict(callers or {})
        self._audience = audience
        self._leeway = leeway
        self._cache_size = cache_size
        self._clock = clock
        self._verified: OrderedDict[str, tuple[UserContext, float]] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, service: str | None = None) -> TokenVerifier:
        """RAGMESH_INTERNAL_PUBLIC_KEY (required) and, for a named `service`, the caller keys registered in
        RAGMESH_INTERNAL_CALLER_KEYS (optional)."""
        pem = _required_env(PUBLIC_KEY_ENV, "every gRPC service verifies internal identity tokens with it")
        raw = os.environ.get(CALLER_KEYS_ENV, "").strip()
        callers = load_caller_keys(raw) if raw and service else {}
        return cls(load_public_keys(pem), callers=callers, audience=service_audience(service) if service else None)

    def verify(self, token: str) -> UserContext:
        """The token's user (carrying the token, to forward it), or InvalidToken."""
        now = self._clock()
        with self._lock:
            cached = self._verified.get(token)
        if cached is not None and now < cached[1]:
            return cached[0]
        user, expires = self._verify(token, now)
        with self._lock:
            self._verified[token] = (user, expires)
            while len(self._verified) > self._cache_size:
                self._verified.popitem(last=False)
        return user

    def _verify(self, token: str, now: float) -> tuple[UserContext, float]:
        caller = self._caller_of(token)
        try:
            # Expiry is checked below against this verifier's clock (the one its cache uses), not PyJWT's.
            claims = jwt.decode(
                token,
                caller.key if caller else signing_key_of(token, self._keys),
                algorithms=[ALGORITHM],
                audience=None if caller else AUDIENCE,
                issuer=caller.caller if caller else ISSUER,
                leeway=self._leeway,
                options={
                    "require": ["sub", "exp", "iat", "aud", "iss"],
                    "verify_exp": False,
                    "verify_aud": caller is None,  # a caller's audiences are checked below
                },
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(str(exc)) from None
        if caller is not None:
            self._check_caller_audience(caller, claims["aud"])
        if not isinstance(claims["exp"], int | float) or claims["exp"] + self._leeway <= now:
            raise InvalidToken("token has expired")
        if claims["exp"] - claims["iat"] > MAX_TTL_SECONDS:
            raise InvalidToken(f"token lives longer than {MAX_TTL_SECONDS}s")
        sub, department, roles = _identity_claims(claims)
        user = UserContext(user_id=sub, department=department, roles=roles, token=token)
        return user, min(float(claims["exp"]), now + MAX_TTL_SECONDS)

    def _caller_of(self, token: str) -> CallerKey | None:
        """The registered caller whose key the token names, or None (then it must be a gateway key's)."""
        if not self._callers:
            return None
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"malformed token: {exc}") from None
        return self._callers.get(kid) if isinstance(kid, str) and kid not in self._keys else None

    def _check_caller_audience(self, caller: CallerKey, aud: Any) -> None:
        audiences = [aud] if isinstance(aud, str) else aud
        if not isinstance(audiences, list) or not audiences or not all(isinstance(a, str) for a in audiences):
            raise InvalidToken("aud must be a string or a list of strings")
        if self._audience is None or self._audience not in audiences:
            raise InvalidToken(f"token of caller {caller.caller!r} is not for this service ({self._audience})")
        denied = sorted(set(audiences) - caller.audiences)
        if denied:
            raise InvalidToken(f"the key of caller {caller.caller!r} may not mint tokens for {', '.join(denied)}")


# ---------- ingestion grants: the signed ingestion task ----------
# The gateway hands the worker a document to ingest through Redis. Whatever Redis holds is not trusted (anyone
# who can write to it could enqueue a task), so the task carries a token minted by the gateway for one user,
# one document, one version and one stored file, with its own audience: a service refuses it as an identity
# token, and the worker refuses an identity token as a grant. It must be valid when the task starts (the queue
# wait); then the worker acts with its own per-hop tokens for that user.
INGEST_AUDIENCE = "ingestion"
MAX_INGEST_TTL_SECONDS = 24 * 3600


def public_keys_from_env(who: str) -> dict[str, Ed25519PublicKey]:
    """The trusted public keys of RAGMESH_INTERNAL_PUBLIC_KEY (required; `who` says what needs them)."""
    return load_public_keys(_required_env(PUBLIC_KEY_ENV, who))


@dataclass(frozen=True)
class IngestGrant:
    """What a verified ingestion token allows: ingest version `version` of `document_id` from `file` (the stored
    upload's path relative to the upload store), acting for `user`."""

    user: UserContext
    document_id: str
    version: int
    file: str
    expires: float


def mint_ingest_token(
    signer: TokenSigner,
    user: UserContext,
    *,
    document_id: str,
    version: int,
    file: str,
    ttl_seconds: int,
    now: float | None = None,
    **overrides: Any,
) -> str:
    """The ingestion token of one task; `overrides` replace claims (tests: expired, foreign document)."""
    if not 1 <= ttl_seconds <= MAX_INGEST_TTL_SECONDS:
        raise ConfigError(f"an ingestion token lives 1..{MAX_INGEST_TTL_SECONDS} s, got {ttl_seconds}")
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = {
        "aud": INGEST_AUDIENCE,
        "iat": issued,
        "exp": issued + ttl_seconds,
        "doc": document_id,
        "ver": version,
        "file": file,
        **overrides,
    }
    return signer.mint(user, issued, **claims)


def verify_ingest_token(
    token: str,
    public_keys: dict[str, Ed25519PublicKey],
    *,
    now: float | None = None,
    leeway: float = LEEWAY_SECONDS,
) -> IngestGrant:
    """The grant of an ingestion token signed by a trusted key, or InvalidToken (forged, expired, an identity
    token, a claim missing or of the wrong type)."""
    now = time.time() if now is None else now
    key = signing_key_of(token, public_keys)
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            audience=INGEST_AUDIENCE,
            issuer=ISSUER,
            leeway=leeway,
            options={
                "require": ["sub", "exp", "iat", "aud", "iss", "doc", "ver", "file"],
                "verify_exp": False,
            },
        )
    except jwt.PyJWTError as exc:
        raise InvalidToken(str(exc)) from None
    exp, iat = claims["exp"], claims["iat"]
    if not isinstance(exp, int | float) or not isinstance(iat, int | float) or exp + leeway <= now:
        raise InvalidToken("token has expired")
    if exp - iat > MAX_INGEST_TTL_SECONDS:
        raise InvalidToken(f"token lives longer than {MAX_INGEST_TTL_SECONDS}s")
    document_id, version, file = claims["doc"], claims["ver"], claims["file"]
    if not isinstance(document_id, str) or not isinstance(file, str) or not file:
        raise InvalidToken("doc and file must be strings")
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise InvalidToken("ver must be a non-negative integer")
    sub, department, roles = _identity_claims(claims)
    user = UserContext(user_id=sub, department=department, roles=roles)
    return IngestGrant(user=user, document_id=document_id, version=version, file=file, expires=float(exp))

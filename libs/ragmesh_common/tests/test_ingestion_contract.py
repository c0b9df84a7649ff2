"""The Redis URL gateway and worker connect with: the password from REDIS_PASSWORD (a Secret, kept out of
REDIS_URL) and, for rediss://, certificate verification, read the same way by redis-py (events, rate limits) and
kombu (the Celery broker). And the ingestion token's own checks, beside the identity token's."""

from __future__ import annotations

import ssl
import time

import pytest
from kombu.utils.url import parse_url as kombu_parse_url
from kombu.utils.url import url_to_parts
from redis.connection import parse_url

from ragmesh_common.config import ConfigError
from ragmesh_common.context import UserContext
from ragmesh_common.ingestion import IngestTask, redis_url
from ragmesh_common.tokens import (
    InvalidToken,
    TokenSigner,
    TokenVerifier,
    generate_keypair,
    load_public_keys,
    load_signing_key,
    mint_ingest_token,
    verify_ingest_token,
)


def test_the_password_reaches_both_clients_quoted() -> None:
    url = redis_url("redis://redis:6379/0", "p@ss:w/rd%")
    assert parse_url(url)["password"] == "p@ss:w/rd%"
    assert url_to_parts(url).password == "p@ss:w/rd%"
    assert parse_url(url)["host"] == "redis" and parse_url(url)["db"] == 0
    assert redis_url("redis://redis:6379/0") == "redis://redis:6379/0"
    assert parse_url(redis_url("redis://app@redis:6379/0", "pw"))["username"] == "app"
    assert redis_url("redis://:inline@redis:6379/0", "other") == "redis://:inline@redis:6379/0"  # the URL's wins


def test_tls_verifies_the_server_against_the_ca_file() -> None:
    url = redis_url("rediss://redis:6380/0", "pw", "/etc/ragmesh/redis-ca/ca.crt")
    parsed = parse_url(url)
    assert (parsed["ssl_cert_reqs"], parsed["ssl_ca_certs"]) == ("required", "/etc/ragmesh/redis-ca/ca.crt")
    broker = kombu_parse_url(url)  # what Celery's connection is built from
    assert broker["password"] == "pw"
    assert broker["ssl"] == {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": "/etc/ragmesh/redis-ca/ca.crt"}
    assert parse_url(redis_url("rediss://redis:6380/0"))["ssl_cert_reqs"] == "required"  # system CAs, verified
    with pytest.raises(ConfigError, match="rediss://"):
        redis_url("redis://redis:6379/0", "", "/ca.crt")
    with pytest.raises(ConfigError, match="REDIS_URL"):
        redis_url("http://redis:6379/0")


def test_task_arguments_must_be_the_contracts() -> None:
    task = IngestTask("d", "t", "/u/d/v1/a.md", "a.md", "text/markdown", 1)
    assert IngestTask.from_args(*task.args()) == task
    for args in (task.args()[:5], [*task.args()[:5], "1"], [*task.args()[:5], -1], [1, *task.args()[1:]]):
        with pytest.raises(ValueError):
            IngestTask.from_args(*args)


def test_an_ingestion_token_is_no_identity_token_and_the_reverse() -> None:
    private, public = generate_keypair()
    signer, keys = TokenSigner(load_signing_key(private), actor="gateway"), load_public_keys(public)
    user = UserContext(user_id="alice", department="eng", roles=("employee",))
    token = mint_ingest_token(signer, user, document_id="d", version=2, file="d/v2/a.md", ttl_seconds=60)
    grant = verify_ingest_token(token, keys)
    assert (grant.user, grant.document_id, grant.version, grant.file) == (user, "d", 2, "d/v2/a.md")
    with pytest.raises(InvalidToken):
        verify_ingest_token(signer.mint(user), keys)  # an identity token grants no ingestion
    with pytest.raises(InvalidToken):
        TokenVerifier(keys).verify(token)  # and a service takes no ingestion token for an identity
    with pytest.raises(InvalidToken, match="expired"):
        verify_ingest_token(token, keys, now=time.time() + 3600)
    with pytest.raises(InvalidToken, match="longer"):
        verify_ingest_token(
            mint_ingest_token(
                signer, user, document_id="d", version=2, file="f", ttl_seconds=60, exp=int(time.time()) + 10**6
            ),
            keys,
        )
    with pytest.raises(ConfigError):
        mint_ingest_token(signer, user, document_id="d", version=2, file="f", ttl_seconds=0)

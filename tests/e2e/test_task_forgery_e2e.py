"""Someone who can write to Redis forges ingestion tasks against the running mesh (issue #30's attack): a task for
another user's document, a genuine grant pointed at a foreign document or at a file outside the upload store (the
internal signing key), a token signed with the attacker's own key, an expired token, no token, the old plain-JSON
user. The worker refuses each (its log and the drained queue say so), the victim's document keeps its content and
chunks, the key never becomes a chunk, and the worker does not even open the file. A legitimate upload still
works, and the dev stack's Redis refuses a client without the password.

The documents belong to users vera (victim) and mal (attacker) of department forgery-e2e and are deleted at the
end."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from ragmesh_common.context import UserContext
from ragmesh_common.ingestion import QUEUE, IngestTask, create_celery, send_ingest
from ragmesh_common.tokens import TokenSigner, generate_keypair, load_signing_key, mint_ingest_token
from ragmesh_dev.devstack import Stack

pytestmark = pytest.mark.e2e

DEPARTMENT = "forgery-e2e"
VICTIM_DOC = b"# Quillwhistle ledger\n\nThe quillwhistle ledger is balanced by the night auditors every Tuesday.\n"
ATTACKER_DOC = b"# Grumbleton notes\n\nGrumbleton pastries are sold at the harbour market on Sundays.\n"
LATER_DOC = b"# Fennimore canal\n\nThe Fennimore canal locks open at dawn for the barley barges.\n"
BAIT = b"# Bait\n\nThis file lies outside the upload store; no worker may read it.\n"
DEADLINE_SECONDS = 600.0  # a failure bound for waiting on the worker, not a measurement
VERA = UserContext(user_id="vera", department=DEPARTMENT, roles=("employee",))
MAL = UserContext(user_id="mal", department=DEPARTMENT, roles=("employee",))


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def client(mesh: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=mesh.gateway_url, timeout=httpx.Timeout(300.0, connect=10.0)) as c:
        yield c


@pytest.fixture(scope="module")
def tokens(mesh: Stack) -> dict[str, str]:
    return {"vera": mesh.token("vera", DEPARTMENT, ["employee"]), "mal": mesh.token("mal", DEPARTMENT, ["employee"])}


@pytest.fixture(scope="module")
def owned(client: httpx.Client, tokens: dict[str, str]) -> Iterator[list[tuple[str, str]]]:
    ids: list[tuple[str, str]] = []
    yield ids
    for user, document_id in ids:
        client.delete(f"/api/v1/documents/{document_id}", headers=auth(tokens[user]))


def upload_ready(
    client: httpx.Client, token: str, name: str, content: bytes, acl: dict[str, Any] | None = None
) -> dict[str, Any]:
    data = {"acl": json.dumps(acl)} if acl else {}
    reply = client.post("/api/v1/documents", headers=auth(token), files={"file": (name, content)}, data=data)
    assert reply.status_code == 202, reply.text
    document_id = reply.json()["document_id"]
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        doc = client.get(f"/api/v1/documents/{document_id}", headers=auth(token)).json()
        if doc["status"] in ("ready", "failed"):
            assert doc["status"] == "ready", doc
            return dict(doc)
        time.sleep(1)
    raise AssertionError(f"{name} was not ready in {DEADLINE_SECONDS}s")


def chunks(client: httpx.Client, token: str, document_id: str) -> list[str]:
    reply = client.get(f"/api/v1/documents/{document_id}/chunks", headers=auth(token))
    assert reply.status_code == 200, reply.text
    return sorted(c["text"] for c in reply.json()["chunks"])


def refusals(mesh: Stack) -> int:
    return (mesh.logs / "ingest-worker.log").read_text(errors="replace").count("refused ingestion task")


def atime_is_tracked(path: Path) -> bool:
    """Whether reading `path` moves its access time here (relatime does when atime <= mtime; noatime never)."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_mtime_ns - 10**9, stat.st_mtime_ns))
    before = path.stat().st_atime_ns
    path.read_bytes()
    tracked = path.stat().st_atime_ns != before
    os.utime(path, ns=(stat.st_mtime_ns - 10**9, stat.st_mtime_ns))  # armed again for the worker
    return tracked


def test_forged_tasks_are_refused_and_read_nothing(
    mesh: Stack, client: httpx.Client, tokens: dict[str, str], owned: list[tuple[str, str]]
) -> None:
    victim = upload_ready(client, tokens["vera"], "ledger.md", VICTIM_DOC)
    owned.append(("vera", victim["document_id"]))
    attacker = upload_ready(client, tokens["mal"], "grumbleton.md", ATTACKER_DOC)
    owned.append(("mal", attacker["document_id"]))
    victim_chunks = chunks(client, tokens["vera"], victim["document_id"])
    store = mesh.data_dir / "uploads"
    victim_path = store / victim["document_id"] / f"v{victim['version']}" / "ledger.md"
    attacker_file = f"{attacker['document_id']}/v{attacker['version']}/grumbleton.md"
    assert victim_path.is_file() and (store / attacker_file).is_file()
    signing_key = mesh.data_dir / "internal-signing-key.pem"
    bait = mesh.data_dir / "bait.md"
    bait.write_bytes(BAIT)
    track = atime_is_tracked(bait)
    bait_atime = bait.stat().st_atime_ns

    real = mesh.internal_signer("gateway")  # stands for tokens an attacker reads off the queue, never mints
    own_key = TokenSigner(load_signing_key(generate_keypair()[0]), actor="gateway")  # the attacker's own key

    def grant(signer: TokenSigner, user: UserContext, document_id: str, file: str, **claims: Any) -> str:
        return mint_ingest_token(signer, user, document_id=document_id, version=0, file=file, ttl_seconds=600, **claims)

    victim_id, attacker_id = victim["document_id"], attacker["document_id"]
    victim_file = victim_path.relative_to(store).as_posix()
    mal_grant = grant(real, MAL, attacker_id, attacker_file)  # genuine: mal's own upload
    now = int(time.time())
    forged = {
        "foreign user (attacker's key)": IngestTask(
            victim_id, grant(own_key, VERA, victim_id, attacker_file), str(store / attacker_file), "x.md", ""
        ),
        "foreign document (mal's grant on vera's document)": IngestTask(
            victim_id, mal_grant, str(store / attacker_file), "x.md", ""
        ),
        "path outside the store (signing key, genuine grant)": IngestTask(
            victim_id, grant(real, VERA, victim_id, victim_file), str(signing_key), "key.md", ""
        ),
        "path outside the store (attacker's key)": IngestTask(
            victim_id, grant(own_key, VERA, victim_id, "../bait.md"), str(bait), "bait.md", ""
        ),
        "dot-dot out of the store": IngestTask(
            attacker_id, mal_grant, str(store / attacker_id / ".." / ".." / "bait.md"), "bait.md", ""
        ),
        "expired token": IngestTask(
            victim_id,
            grant(real, MAL, victim_id, attacker_file, iat=now - 4000, exp=now - 3000),
            str(store / attacker_file),
            "x.md",
            "",
        ),
        "no token": IngestTask(victim_id, "", str(bait), "bait.md", ""),
        "plain user JSON": IngestTask(victim_id, '{"user_id": "vera", "roles": ["admin"]}', str(bait), "b.md", ""),
    }
    before = refusals(mesh)
    app = create_celery(mesh.redis_url)
    for forged_task in forged.values():
        send_ingest(app, forged_task)
    broker = redis.Redis.from_url(mesh.redis_url)
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline and refusals(mesh) < before + len(forged):
        time.sleep(0.5)
    assert refusals(mesh) - before == len(forged), "the worker did not refuse every forged task"
    assert broker.llen(QUEUE) == 0  # taken and dropped: none waits for a retry

    doc = client.get(f"/api/v1/documents/{victim_id}", headers=auth(tokens["vera"])).json()
    assert (doc["status"], doc["version"], doc["pending_version"]) == ("ready", victim["version"], 0)
    assert doc["content_sha256"] == victim["content_sha256"]
    assert chunks(client, tokens["vera"], victim_id) == victim_chunks
    assert victim_path.read_bytes() == VICTIM_DOC
    for user in ("vera", "mal"):
        listed = client.get("/api/v1/documents", headers=auth(tokens[user])).json()["documents"]
        texts = [t for d in listed for t in chunks(client, tokens[user], d["document_id"])]
        assert not [t for t in texts if "PRIVATE KEY" in t or "no worker may read it" in t]
    if track:  # the worker never opened the bait (on a filesystem that records reads)
        assert bait.stat().st_atime_ns == bait_atime

    later = upload_ready(client, tokens["vera"], "canal.md", LATER_DOC)  # the legitimate path still works
    owned.append(("vera", later["document_id"]))
    assert any("Fennimore" in t for t in chunks(client, tokens["vera"], later["document_id"]))


def test_the_dev_redis_refuses_a_client_without_the_password(mesh: Stack) -> None:
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host=mesh.host, port=mesh.ports["redis"], socket_timeout=10).ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host=mesh.host, port=mesh.ports["redis"], password="guess", socket_timeout=10).ping()
    assert redis.Redis.from_url(mesh.redis_url, socket_timeout=10).ping()
    secrets_file = mesh.data_dir / "secrets.json"
    assert "redis_password" in secrets_file.read_text() and secrets_file.stat().st_mode & 0o777 == 0o600

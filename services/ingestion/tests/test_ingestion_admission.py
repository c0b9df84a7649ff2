"""Forged ingestion tasks, as someone who can write to Redis would enqueue them: a foreign user, a foreign
document, a path outside the upload store, a symlink planted in it, an expired token, no token. The worker runs
none of them, reads nothing for them and never retries them; a task the gateway signed runs for the user its
token names, and its retry carries a fresh grant of the same scope."""

from __future__ import annotations

import base64
import importlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jwt
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragmesh_common import attributes as attr
from ragmesh_common.identity import UserContext
from ragmesh_common.ingestion import IngestTask
from ragmesh_common.tokens import (
    TokenSigner,
    generate_keypair,
    load_public_keys,
    load_signing_key,
    mint_ingest_token,
)
from ragmesh_ingestion.admission import TaskRefused, admit, read_in_store, store_relative

DOC = "7b0e3f5e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
OTHER_DOC = "11111111-2222-4333-8444-555555555555"
ALICE = UserContext(user_id="alice", department="eng", roles=("employee",))
MALLORY = UserContext(user_id="mallory", department="ops", roles=("employee",))
PRIVATE, PUBLIC = generate_keypair()
SIGNER = TokenSigner(load_signing_key(PRIVATE), actor="gateway")
KEYS = load_public_keys(PUBLIC)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "uploads"
    (root / DOC / "v1").mkdir(parents=True)
    (root / DOC / "v1" / "notes.md").write_text("# Notes\n\nalice's words")
    (root / OTHER_DOC / "v1").mkdir(parents=True)
    (root / OTHER_DOC / "v1" / "mine.md").write_text("# Mine\n\nmallory's words")
    (tmp_path / "internal-signing-key.pem").write_text(PRIVATE)  # what an attacker wants read
    return root


def grant(user: UserContext = ALICE, document_id: str = DOC, version: int = 1, file: str = "", **claims: Any) -> str:
    return mint_ingest_token(
        SIGNER,
        user,
        document_id=document_id,
        version=version,
        file=file or f"{document_id}/v{version}/notes.md",
        ttl_seconds=600,
        **claims,
    )


def task(store: Path, token: str, document_id: str = DOC, path: str = "", version: int = 1) -> IngestTask:
    return IngestTask(document_id, token, path or str(store / DOC / "v1" / "notes.md"), "notes.md", "", version)


def test_a_task_the_gateway_signed_is_admitted_for_the_user_its_token_names(store: Path) -> None:
    admitted = admit(task(store, grant()), KEYS, store)
    assert admitted.grant.user == ALICE and admitted.relative == f"{DOC}/v1/notes.md"
    assert read_in_store(store, admitted.relative) == b"# Notes\n\nalice's words"


def tampered(token: str, **claims: Any) -> str:
    """`token` with claims replaced, its signature kept (no longer matching)."""
    header, payload, signature = token.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    edited = base64.urlsafe_b64encode(json.dumps({**data, **claims}).encode()).decode().rstrip("=")
    return f"{header}.{edited}.{signature}"


def forged(store: Path) -> dict[str, IngestTask]:
    other_key = TokenSigner(load_signing_key(generate_keypair()[0]), actor="gateway")
    mallory_grant = grant(MALLORY, OTHER_DOC, file=f"{OTHER_DOC}/v1/mine.md")
    key_file = str(store.parent / "internal-signing-key.pem")
    return {
        # a user the attacker names: signed with a key the worker does not trust, or not signed at all
        "foreign user, claims edited": task(store, tampered(grant(MALLORY), sub="alice")),
        "foreign user, other key": task(
            store,
            mint_ingest_token(other_key, ALICE, document_id=DOC, version=1, file=f"{DOC}/v1/notes.md", ttl_seconds=600),
        ),
        "foreign user, alg none": task(
            store,
            jwt.encode(
                {
                    "sub": "alice",
                    "aud": "ingestion",
                    "iss": "ragmesh-gateway",
                    "doc": DOC,
                    "ver": 1,
                    "file": f"{DOC}/v1/notes.md",
                    "iat": int(time.time()),
                    "exp": int(time.time()) + 600,
                },
                None,
                algorithm="none",
            ),
        ),
        # mallory's genuine grant for her own document, pointed at alice's
        "foreign document": task(store, mallory_grant, document_id=DOC),
        "foreign file": task(store, mallory_grant, document_id=OTHER_DOC, version=1),
        "other version": task(store, grant(version=2), version=1),
        "outside the store": task(store, grant(file="../internal-signing-key.pem"), path=key_file),
        "dot-dot": task(store, grant(), path=str(store / DOC / ".." / ".." / "internal-signing-key.pem")),
        "relative path": task(store, grant(), path=f"{DOC}/v1/notes.md"),
        "expired": task(store, grant(iat=int(time.time()) - 4000, exp=int(time.time()) - 3000)),
        "identity token": task(store, SIGNER.mint(ALICE)),
        "no token": task(store, ""),
        "the old plain user": task(store, '{"user_id": "alice", "department": "eng", "roles": ["admin"]}'),
    }


def test_forged_tasks_are_refused_before_anything_is_read(store: Path) -> None:
    for name, forged_task in forged(store).items():
        with pytest.raises(TaskRefused):
            admit(forged_task, KEYS, store)
            pytest.fail(f"{name} was admitted")


def test_a_symlink_planted_in_the_store_is_refused(store: Path) -> None:
    link = store / DOC / "v1" / "link.md"
    link.symlink_to(store.parent / "internal-signing-key.pem")
    with pytest.raises(TaskRefused, match="symlink"):
        admit(task(store, grant(file=f"{DOC}/v1/link.md"), path=str(link)), KEYS, store)
    with pytest.raises(TaskRefused, match="symlink"):
        read_in_store(store, f"{DOC}/v1/link.md")  # the read itself follows no link either (a link planted later)
    (store / "evil").symlink_to(store.parent, target_is_directory=True)
    with pytest.raises(TaskRefused):
        read_in_store(store, "evil/internal-signing-key.pem")
    with pytest.raises(TaskRefused):
        admit(
            task(
                store,
                grant(file="evil/internal-signing-key.pem"),
                path=str(store / "evil" / "internal-signing-key.pem"),
            ),
            KEYS,
            store,
        )


def test_store_relative_refuses_paths_that_leave_the_store(store: Path) -> None:
    assert store_relative(str(store / DOC / "v1" / "notes.md"), store) == f"{DOC}/v1/notes.md"
    for path in ("/etc/passwd", str(store), f"{store}/../uploads2/x", f"{store}/{DOC}/../../x", "notes.md"):
        with pytest.raises(TaskRefused):
            store_relative(path, store)


# ---------- the Celery task itself ----------


@pytest.fixture
def worker(store: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The worker module as `celery -A ragmesh_ingestion.worker` loads it, configured by its environment."""
    for name, value in {
        "PARSER_ADDR": "127.0.0.1:1",
        "EMBEDDER_ADDR": "127.0.0.1:1",
        "RETRIEVER_ADDR": "127.0.0.1:1",
        "GRAPH_ADDR": "127.0.0.1:1",
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "GATEWAY_UPLOAD_DIR": str(store),
        "RAGMESH_INTERNAL_SIGNING_KEY": PRIVATE,
        "RAGMESH_INTERNAL_PUBLIC_KEY": PUBLIC,
        "OTEL_SDK_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    sys.modules.pop("ragmesh_ingestion.worker", None)
    module = importlib.import_module("ragmesh_ingestion.worker")
    monkeypatch.delenv("OTEL_SDK_DISABLED")  # the module installed no exporter; the test's provider records
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(module, "tracer", provider.get_tracer("test"))
    module.spans = exporter  # type: ignore[attr-defined]
    runs: list[Any] = []
    monkeypatch.setattr(module._loop, "run", lambda coroutine_of: runs.append(coroutine_of))
    module.runs = runs  # type: ignore[attr-defined]
    try:
        yield module
    finally:
        sys.modules.pop("ragmesh_ingestion.worker", None)


def test_the_worker_runs_no_forged_task_and_traces_each_refusal(
    worker: Any, store: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tasks = forged(store)
    opened: list[str] = []
    real_open = os.open

    def recording_open(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    with caplog.at_level(logging.WARNING, logger="ragmesh_ingestion.worker"), pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "open", recording_open)
        for name in ("builtins.open", "io.open"):  # open() and Path.read_bytes()
            patch.setattr(name, lambda *a, **k: pytest.fail(f"the worker opened {a[0]!r}"))
        for forged_task in tasks.values():
            assert worker.ingest_document.run(*forged_task.args()) is None  # acknowledged: no exception, no retry
        worker.ingest_document.run("only", "two")
    assert opened == []  # not the signing key, not the victim's file: nothing
    assert worker.runs == []  # no ingestion started: nothing read, nothing sent to a service
    refusals = [r for r in caplog.records if r.getMessage().startswith("refused ingestion task")]
    assert len(refusals) == len(tasks) + 1
    spans = worker.spans.get_finished_spans()
    assert len(spans) == len(tasks) + 1
    assert all(s.name == "ingest.admit" and s.attributes.get(attr.RAG_INGEST_REFUSED) for s in spans)
    assert all(s.status.status_code.name == "ERROR" for s in spans)


def test_the_worker_runs_a_signed_task_for_its_user_and_retries_with_a_fresh_grant(
    worker: Any, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signed = task(store, grant())
    worker.ingest_document.run(*signed.args())
    [run] = worker.runs
    assert run.keywords["admitted"].grant.user == ALICE and run.keywords["task"] == signed

    def unavailable(coroutine_of: Any) -> None:
        raise worker.TransientIngestError("parse: UNAVAILABLE")

    retried: list[dict[str, Any]] = []

    def retry(**kwargs: Any) -> Exception:
        retried.append(kwargs)
        return RuntimeError("retry")

    monkeypatch.setattr(worker._loop, "run", unavailable)
    monkeypatch.setattr(worker.ingest_document, "retry", retry)
    with pytest.raises(RuntimeError, match="retry"):
        worker.ingest_document.run(*signed.args())
    again = IngestTask.from_args(*retried[0]["args"])
    assert again.token != signed.token and again.path == signed.path
    admitted = admit(again, KEYS, store)
    assert (admitted.grant.user, admitted.grant.document_id, admitted.relative) == (ALICE, DOC, f"{DOC}/v1/notes.md")
    assert os.environ["RAGMESH_INTERNAL_PUBLIC_KEY"] == PUBLIC

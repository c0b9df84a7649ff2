"""Connector runs against the real store (embedded PostgreSQL, the connectors role) and a recording sink: the
folder source's change detection, deletions, ACL mapping files and inheritance, the allowed base directories,
symlinks, hidden files, size and type limits, resume after a run killed midway, and the web source's increments."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from prometheus_client import REGISTRY

from ragmesh_common.connectors import ConnectorIn, ConnectorStore, allowed_roots, check_root
from ragmesh_dev.websites import Site, serve
from ragmesh_ingestion.connectors.base import Fetched
from ragmesh_ingestion.connectors.engine import DocumentGone
from ragmesh_ingestion.connectors.tasks import run_connector

ENG = {"public": False, "departments": ["eng"], "roles": [], "users": []}
HR = {"public": False, "departments": ["hr"], "roles": [], "users": []}
NONE = {"public": False, "departments": [], "roles": [], "users": []}


class Killed(BaseException):
    """The worker dies (SIGKILL, a reboot): nothing after this point runs."""


class FakeSink:
    """The catalogue as the engine sees it: one document per (owner, content) like CreateOrGetDocument."""

    def __init__(self, kill_after_creates: int | None = None) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.kill_after = kill_after_creates

    def create(self, item: Fetched, sha256: str, acl: dict[str, Any]) -> tuple[str, bool]:
        for doc_id, doc in self.docs.items():
            if doc["sha"] == sha256:
                return doc_id, True
        if self.kill_after is not None and len([c for c in self.calls if c[0] == "create"]) >= self.kill_after:
            raise Killed()
        doc_id = str(uuid.uuid4())
        self.docs[doc_id] = {"sha": sha256, "acl": acl, "content": item.content, "version": 1, "title": item.title}
        self.calls.append(("create", item.key))
        return doc_id, False

    def new_version(self, document_id: str, item: Fetched, sha256: str) -> None:
        if document_id not in self.docs:
            raise DocumentGone("gone")
        self.docs[document_id].update(sha=sha256, content=item.content, version=self.docs[document_id]["version"] + 1)
        self.calls.append(("new_version", item.key))

    def set_acl(self, document_id: str, acl: dict[str, Any]) -> None:
        self.docs[document_id]["acl"] = acl
        self.calls.append(("set_acl", document_id))

    def delete(self, document_id: str) -> None:
        del self.docs[document_id]
        self.calls.append(("delete", document_id))

    def by_content(self, text: bytes) -> dict[str, Any]:
        return next(d for d in self.docs.values() if d["content"] == text)


@pytest.fixture(scope="module")
def store(connectors_dsn: str) -> Iterator[ConnectorStore]:
    """The store as the connectors role (the suite's `connectors_dsn`)."""
    store = ConnectorStore(connectors_dsn)
    yield store
    store.close()


def test_the_store_reuses_its_connections_and_keeps_run_locks_off_them(connectors_dsn: str) -> None:
    """Calls share the pool's connections (one backend while one at a time); a run's advisory lock is taken on a
    connection of its own, so it never stays on a pooled connection after the run."""
    store = ConnectorStore(connectors_dsn, pool_size=1)
    try:
        backends = set()
        for _ in range(5):
            with store._connect() as conn:
                row = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()
                backends.add(row["pid"] if row else None)
        assert len(backends) == 1
        connector_id = str(uuid.uuid4())
        with store.run_lock(connector_id) as locked:
            assert locked
            with store._connect() as conn:  # the pooled connection holds no lock of the run
                held = conn.execute(
                    "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
                ).fetchone()
                assert held is not None and held["n"] == 0
            with store.run_lock(connector_id) as again:  # one run per connector at a time
                assert not again
        with store.run_lock(connector_id) as after:  # released with the run
            assert after
    finally:
        store.close()


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    allowed = tmp_path / "shares"
    allowed.mkdir()
    monkeypatch.setenv("CONNECTORS_ALLOWED_ROOTS", str(allowed))
    return allowed


def folder_connector(store: ConnectorStore, root: Path, **extra: Any) -> dict[str, Any]:
    spec = ConnectorIn(
        name=f"f-{uuid.uuid4().hex[:8]}", kind="folder", config={"root": str(root), **extra}, acl={"users": ["bob"]}
    )
    return store.create(spec, "root")


def run(store: ConnectorStore, connector: dict[str, Any], sink: FakeSink) -> dict[str, Any]:
    queued = store.queue_run(connector["connector_id"], "manual")
    run_connector(store, connector["connector_id"], queued["run_id"], lambda _name: sink)
    report = store.get_run(queued["run_id"])
    assert report is not None
    return report


@pytest.fixture
def share(base: Path) -> Iterator[Path]:
    root = base / "team"
    (root / "hr").mkdir(parents=True)
    (root / "a.md").write_text("# Alpha\n\nThe alpha project ships in March.\n")
    (root / "hr" / "pay.txt").write_text("Salary bands are reviewed every April.\n")
    (root / ".secret.md").write_text("hidden\n")
    (root / "tool.exe").write_bytes(b"MZ\x90\x00binary")
    (root / "big.txt").write_text("x" * 5000)
    (root / ".ragmesh-acl.yaml").write_text(
        "acl: {departments: [eng]}\nrules:\n  - match: 'hr/*'\n    acl: {departments: [hr]}\n"
    )
    outside = base.parent / "outside.md"
    outside.write_text("# Outside the share\n")
    (root / "link.md").symlink_to(outside)
    yield root


def test_folder_sync_new_unchanged_changed_deleted_and_acl(store: ConnectorStore, share: Path) -> None:
    connector = folder_connector(store, share, max_file_bytes=1000)
    sink = FakeSink()
    first = run(store, connector, sink)
    assert first["status"] == "succeeded", first
    assert first["counts"]["new"] == 2 and first["counts"]["skipped"] == 3  # exe, too big, symlink
    reasons = {p["key"]: p["reason"] for p in first["problems"]}
    assert "symlink" in reasons["link.md"] and "larger" in reasons["big.txt"] and "unsupported" in reasons["tool.exe"]
    assert ".secret.md" not in reasons and ".ragmesh-acl.yaml" not in reasons  # hidden: not synced, not reported
    assert sink.by_content(b"# Alpha\n\nThe alpha project ships in March.\n")["acl"] == ENG
    assert sink.by_content(b"Salary bands are reviewed every April.\n")["acl"] == HR
    assert not any(d["content"] == b"# Outside the share\n" for d in sink.docs.values())

    sink.calls.clear()
    second = run(store, connector, sink)
    assert second["counts"]["unchanged"] == 2 and second["counts"]["new"] == 0 and sink.calls == []
    # the worker's metrics count the runs and their items by connector id (not by its name)
    labels = {"connector_id": connector["connector_id"], "kind": "folder"}
    assert REGISTRY.get_sample_value("ragmesh_connector_runs_total", {**labels, "status": "succeeded"}) == 2
    assert REGISTRY.get_sample_value("ragmesh_connector_items_total", {**labels, "outcome": "new"}) == 2
    assert REGISTRY.get_sample_value("ragmesh_connector_items_total", {**labels, "outcome": "unchanged"}) == 2
    assert REGISTRY.get_sample_value("ragmesh_connector_items_total", {**labels, "outcome": "skipped"}) == 6

    (share / "a.md").write_text("# Alpha\n\nThe alpha project ships in May.\n")
    (share / "hr" / "pay.txt").unlink()
    (share / "b.md").write_text("# Beta\n\nBeta is new.\n")
    third = run(store, connector, sink)
    assert (third["counts"]["changed"], third["counts"]["deleted"], third["counts"]["new"]) == (1, 1, 1)
    alpha = sink.by_content(b"# Alpha\n\nThe alpha project ships in May.\n")
    assert alpha["version"] == 2
    assert not any(d["content"].startswith(b"Salary") for d in sink.docs.values())

    # an ACL change in the mapping file reaches the documents at the next run, without re-ingesting them
    (share / ".ragmesh-acl.yaml").write_text("acl: {departments: [sales]}\n")
    sink.calls.clear()
    fourth = run(store, connector, sink)
    assert fourth["counts"]["acl_changed"] == 2 and fourth["counts"]["unchanged"] == 2
    assert {c[0] for c in sink.calls} == {"set_acl"}
    assert all(d["acl"]["departments"] == ["sales"] for d in sink.docs.values())


def test_acl_inherited_from_parent_folders_and_the_connector(store: ConnectorStore, base: Path) -> None:
    root = base / "inherit"
    (root / "eng" / "deep" / "deeper").mkdir(parents=True)
    (root / "eng" / ".ragmesh-acl.json").write_text('{"acl": {"departments": ["eng"]}}')
    (root / "eng" / "deep" / "deeper" / "x.md").write_text("# X\n\ndeep file\n")
    (root / "top.md").write_text("# Top\n\nno mapping above it\n")
    connector = folder_connector(store, root)
    sink = FakeSink()
    assert run(store, connector, sink)["counts"]["new"] == 2
    assert sink.by_content(b"# X\n\ndeep file\n")["acl"] == ENG  # from eng/, two folders up
    assert sink.by_content(b"# Top\n\nno mapping above it\n")["acl"]["users"] == ["bob"]  # the connector's ACL


def test_invalid_mapping_fails_its_files_and_deletes_nothing(store: ConnectorStore, share: Path) -> None:
    connector = folder_connector(store, share, max_file_bytes=1000)
    sink = FakeSink()
    run(store, connector, sink)
    (share / "hr" / ".ragmesh-acl.yaml").write_text("acl: {departmentz: [x]}\n")
    (share / "hr" / "pay.txt").write_text("Salary bands changed.\n")
    report = run(store, connector, sink)
    assert report["status"] == "partial" and report["counts"]["failed"] == 1
    assert any("mapping" in p["reason"] for p in report["problems"])
    assert sink.by_content(b"Salary bands are reviewed every April.\n")["acl"] == HR  # kept as it was


def test_resume_after_a_run_killed_midway(store: ConnectorStore, base: Path) -> None:
    root = base / "many"
    root.mkdir()
    for i in range(6):
        (root / f"doc{i}.md").write_text(f"# Doc {i}\n\ncontent {i}\n")
    connector = folder_connector(store, root)
    killed = FakeSink(kill_after_creates=3)
    queued = store.queue_run(connector["connector_id"], "manual")
    with pytest.raises(Killed):
        run_connector(store, connector["connector_id"], queued["run_id"], lambda _name: killed)
    dead = store.get_run(queued["run_id"])
    assert dead is not None and dead["status"] == "running"  # the worker died: nobody finished the report

    sink = FakeSink()
    sink.docs = dict(killed.docs)  # the catalogue kept what the dead run made
    report = run(store, connector, sink)
    assert report["status"] == "succeeded" and report["counts"]["new"] == 3 and report["counts"]["unchanged"] == 3
    assert [c[0] for c in sink.calls] == ["create"] * 3  # only the three not done before
    assert len(sink.docs) == 6
    dead = store.get_run(queued["run_id"])
    assert dead is not None and dead["status"] == "interrupted"


def test_roots_outside_the_allowed_bases_are_refused(store: ConnectorStore, base: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="outside"):
        check_root(str(tmp_path / "elsewhere"), allowed_roots())
    with pytest.raises(ValueError, match=r"\.\."):
        check_root(str(base / ".." / "x"), allowed_roots())
    # a root that names an allowed folder but resolves outside it (a symlink) fails the run, deleting nothing
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "p.md").write_text("# private\n")
    (base / "sneaky").symlink_to(tmp_path / "private")
    connector = folder_connector(store, base / "sneaky")
    sink = FakeSink()
    report = run(store, connector, sink)
    assert report["status"] == "failed" and "outside the allowed" in report["message"] and sink.docs == {}


def test_identical_files_share_a_document_until_the_last_goes(store: ConnectorStore, base: Path) -> None:
    root = base / "dups"
    (root / "hr").mkdir(parents=True)
    (root / "hr" / ".ragmesh-acl.yaml").write_text("acl: {departments: [hr]}\n")
    (root / "pub.md").write_text("# Same\n\nsame bytes\n")
    (root / "hr" / "copy.md").write_text("# Same\n\nsame bytes\n")
    connector = folder_connector(store, root)
    sink = FakeSink()
    run(store, connector, sink)
    (doc,) = sink.docs.values()
    assert doc["acl"]["departments"] == ["hr"] and doc["acl"]["users"] == ["bob"]  # the union of both copies
    (root / "hr" / "copy.md").unlink()
    run(store, connector, sink)
    (doc,) = sink.docs.values()
    assert doc["acl"]["departments"] == [] and doc["acl"]["users"] == ["bob"]
    (root / "pub.md").unlink()
    run(store, connector, sink)
    assert sink.docs == {}


def test_deleting_connector_deletes_its_documents(store: ConnectorStore, share: Path) -> None:
    connector = folder_connector(store, share, max_file_bytes=1000)
    sink = FakeSink()
    run(store, connector, sink)
    assert len(sink.docs) == 2
    store.mark_deleting(connector["connector_id"])
    queued = store.queue_run(connector["connector_id"], "delete")
    run_connector(store, connector["connector_id"], queued["run_id"], lambda _name: sink)
    assert sink.docs == {} and store.get(connector["connector_id"]) is None


def test_schedule_claims_each_due_connector_once(store: ConnectorStore, base: Path) -> None:
    spec = ConnectorIn(name=f"s-{uuid.uuid4().hex[:8]}", kind="folder", config={"root": str(base)}, schedule_seconds=60)
    created = store.create(spec, "root")
    due = store.claim_due()
    assert created["connector_id"] in due
    assert created["connector_id"] not in store.claim_due()  # moved to its next time


def test_web_connector_increments(store: ConnectorStore) -> None:
    site = Site()
    server, _ = serve(site)
    try:
        site.html("/", '<a href="/a">a</a><a href="/b">b</a>', ETag='"home1"')
        site.html("/a", "<p>Alpha page</p>", ETag='"a1"')
        site.html("/b", "<p>Beta page</p>")
        spec = ConnectorIn(
            name=f"w-{uuid.uuid4().hex[:8]}",
            kind="web",
            config={"seeds": [f"{site.base}/"], "allowed_hosts": [f"127.0.0.1:{site.port}"]},
        )
        connector = store.create(spec, "root")
        sink = FakeSink()
        assert run(store, connector, sink)["counts"]["new"] == 3
        site.html("/b", "<p>Beta page, edited</p>")
        del site.pages["/a"]
        report = run(store, connector, sink)
        counts = report["counts"]
        assert (counts["unchanged"], counts["changed"], counts["deleted"]) == (1, 1, 1), report
        assert hashlib.sha256(b"<p>Beta page, edited</p>").hexdigest() in {d["sha"] for d in sink.docs.values()}
    finally:
        server.shutdown()
        server.server_close()


def test_store_rejects_duplicate_names(store: ConnectorStore, base: Path) -> None:
    from ragmesh_common.connectors import ConnectorExists

    spec = ConnectorIn(name=f"d-{uuid.uuid4().hex[:8]}", kind="folder", config={"root": str(base)})
    store.create(spec, "root")
    with pytest.raises(ConnectorExists):
        store.create(spec, "root")
    assert os.environ["CONNECTORS_ALLOWED_ROOTS"] == str(base)


def test_the_connectors_role_reads_no_document_chunk_or_span(store: ConnectorStore) -> None:
    with psycopg.connect(store.dsn, autocommit=True) as conn:
        for statement in ("SELECT count(*) FROM documents", "SELECT count(*) FROM chunks", "SELECT 1 FROM rag_traces"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


def test_beat_tick_queues_a_run_for_each_due_connector(
    store: ConnectorStore, base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beat's schedule names the tick; the tick (the worker's task) claims the due connectors and queues their runs."""
    from ragmesh_common.connectors import RUN_TASK, TICK_TASK, configure_beat
    from ragmesh_common.ingestion import QUEUE, create_celery
    from ragmesh_common.testing import local_signer
    from ragmesh_ingestion.config import Settings
    from ragmesh_ingestion.connectors import tasks

    app = create_celery("redis://127.0.0.1:1/0")
    configure_beat(app, QUEUE, 30)
    entry = app.conf.beat_schedule["connectors-tick"]
    assert entry["task"] == TICK_TASK and entry["schedule"] == 30 and entry["options"]["queue"] == QUEUE

    sent: list[tuple[str, str, str]] = []
    monkeypatch.setattr(tasks, "send_run", lambda _app, cid, rid, queue: sent.append((cid, rid, queue)))
    monkeypatch.setenv("CONNECTORS_DSN", store.dsn)
    settings = Settings(
        parser_addr="x:1", embedder_addr="x:1", retriever_addr="x:1", graph_addr="x:1",
        redis_url="redis://127.0.0.1:1/0", upload_dir=tmp_path / "uploads",
    )  # fmt: skip
    tasks.register(app, settings=settings, signer=local_signer(), loop_run=lambda _call: None)
    assert RUN_TASK in app.tasks

    spec = ConnectorIn(
        name=f"b-{uuid.uuid4().hex[:8]}", kind="folder", config={"root": str(base)}, schedule_seconds=600
    )
    due = store.create(spec, "root")
    manual = store.create(ConnectorIn(name=f"m-{uuid.uuid4().hex[:8]}", kind="folder", config={"root": str(base)}), "r")
    app.tasks[TICK_TASK].run()
    mine = [s for s in sent if s[0] in (due["connector_id"], manual["connector_id"])]
    assert [s[0] for s in mine] == [due["connector_id"]] and mine[0][2] == QUEUE  # the manual one never ticks
    (run,) = store.runs(due["connector_id"])
    assert run["run_id"] == mine[0][1] and run["trigger"] == "schedule" and run["status"] == "queued"
    app.tasks[TICK_TASK].run()  # not due again for ten minutes
    assert len([s for s in sent if s[0] == due["connector_id"]]) == 1


def test_a_run_whose_store_is_down_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refused_port: int
) -> None:
    """The store unreachable: the tick logs it and ends; the run goes through Celery's retry (called directly, as
    here, the retry raises the store's error instead of queueing the task again)."""
    from ragmesh_common.connectors import RUN_TASK, TICK_TASK
    from ragmesh_common.ingestion import create_celery
    from ragmesh_common.testing import local_signer
    from ragmesh_ingestion.config import Settings
    from ragmesh_ingestion.connectors import tasks

    monkeypatch.setenv("CONNECTORS_DSN", f"postgresql://nobody:x@127.0.0.1:{refused_port}/none")
    app = create_celery("redis://127.0.0.1:1/0")
    settings = Settings(
        parser_addr="x:1", embedder_addr="x:1", retriever_addr="x:1", graph_addr="x:1",
        redis_url="redis://127.0.0.1:1/0", upload_dir=tmp_path / "uploads",
    )  # fmt: skip
    tasks.register(app, settings=settings, signer=local_signer(), loop_run=lambda _call: None)
    app.tasks[TICK_TASK].run()  # logged, not raised
    retry = app.tasks[RUN_TASK]
    assert retry.max_retries == tasks.STORE_RETRIES
    with pytest.raises(psycopg.OperationalError):
        retry(str(uuid.uuid4()), str(uuid.uuid4()))

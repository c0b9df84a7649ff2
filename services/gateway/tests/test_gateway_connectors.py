"""The connectors admin API over the real connector store (embedded PostgreSQL, the connectors role): admins only,
folder roots confined to CONNECTORS_ALLOWED_ROOTS, web seeds to their allowed hosts, runs queued on the ingestion
queue and listed with their reports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragmesh_cli.tokens import mint
from ragmesh_gateway.app import create_app
from ragmesh_gateway.config import Settings
from ragmesh_gateway.routers import connectors as router

SECRET = "test-secret-which-is-long-enough-for-hs256"


class NoMesh:
    """The connectors API calls no service."""

    retriever = answerer = parser = reranker = graph = embedder = None

    async def health(self) -> dict[str, str]:
        return {}

    async def close(self) -> None:
        pass


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    calls: list[tuple[str, str, str]] = []
    monkeypatch.setattr(router, "send_run", lambda _app, cid, rid, queue: calls.append((cid, rid, queue)))
    return calls


@pytest.fixture
def app_for(tmp_path: Path, connectors_dsn: str) -> Iterator[Any]:
    shares = tmp_path / "shares"
    (shares / "team").mkdir(parents=True)
    settings = Settings(
        parser_addr="x:1",
        embedder_addr="x:1",
        retriever_addr="x:1",
        reranker_addr="x:1",
        graph_addr="x:1",
        answerer_addr="x:1",
        redis_url="redis://127.0.0.1:1/0",
        cache_enabled=False,
        upload_dir=tmp_path / "uploads",
        jwt_secret=SECRET,
        rate_limit_per_minute=0,
        connectors_dsn=connectors_dsn,
        connectors_allowed_roots=str(shares),
    )
    app = create_app(settings, mesh=NoMesh())  # type: ignore[arg-type]
    clients: list[TestClient] = []

    def client(roles: list[str] | None) -> TestClient:
        headers = {"Authorization": f"Bearer {mint(SECRET, 'root', '', roles)}"} if roles is not None else {}
        c = TestClient(app, raise_server_exceptions=False, headers=headers)
        c.__enter__()
        clients.append(c)
        return c

    yield client, shares
    for c in clients:
        c.__exit__(None, None, None)


def test_only_admins(app_for: Any) -> None:
    client, _ = app_for
    assert client(None).get("/api/v1/admin/connectors").status_code == 401
    user = client(["employee"])
    assert user.get("/api/v1/admin/connectors").status_code == 403
    body = {"name": "x", "kind": "folder", "config": {"root": "/tmp"}}
    assert user.post("/api/v1/admin/connectors", json=body).status_code == 403


def test_create_list_run_and_delete(app_for: Any, sent: list[tuple[str, str, str]]) -> None:
    client, shares = app_for
    admin = client(["admin"])
    body = {
        "name": "team-share",
        "kind": "folder",
        "config": {"root": str(shares / "team")},
        "acl": {"departments": ["eng"]},
        "schedule_seconds": 3600,
    }
    created = admin.post("/api/v1/admin/connectors", json=body)
    assert created.status_code == 201, created.text
    connector = created.json()
    assert connector["owner"] == "connector:team-share" and connector["acl"]["departments"] == ["eng"]
    assert admin.post("/api/v1/admin/connectors", json=body).status_code == 409
    listed = admin.get("/api/v1/admin/connectors").json()["connectors"]
    assert "team-share" in {c["name"] for c in listed}

    cid = connector["connector_id"]
    run = admin.post(f"/api/v1/admin/connectors/{cid}/runs", json={})  # as the CLI sends it
    assert run.status_code == 202 and run.json()["status"] == "queued" and run.json()["trigger"] == "manual"
    assert sent[-1][:2] == (cid, run.json()["run_id"]) and sent[-1][2] == "ingest"
    runs = admin.get(f"/api/v1/admin/connectors/{cid}/runs").json()["runs"]
    assert [r["run_id"] for r in runs] == [run.json()["run_id"]]
    one = admin.get(f"/api/v1/admin/connectors/{cid}/runs/{runs[0]['run_id']}")
    assert one.status_code == 200 and one.json()["counts"] == {}

    deleted = admin.delete(f"/api/v1/admin/connectors/{cid}")
    assert deleted.status_code == 202 and deleted.json()["run"]["trigger"] == "delete"
    assert admin.get(f"/api/v1/admin/connectors/{cid}").json()["state"] == "deleting"
    assert admin.post(f"/api/v1/admin/connectors/{cid}/runs").status_code == 409
    missing = "00000000-0000-4000-8000-000000000000"
    assert admin.get(f"/api/v1/admin/connectors/{missing}").status_code == 404


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"root": "/etc"}, "outside the allowed"),
        ({"root": "relative/path"}, "absolute"),
        ({"root": "{shares}/../escape"}, ".."),
    ],
)
def test_folder_roots_outside_the_allowed_bases_are_422(app_for: Any, config: dict[str, str], words: str) -> None:
    client, shares = app_for
    config = {"root": config["root"].replace("{shares}", str(shares))}
    reply = client(["admin"]).post("/api/v1/admin/connectors", json={"name": "bad", "kind": "folder", "config": config})
    assert reply.status_code == 422 and words in reply.text, reply.text


def test_web_connectors_are_checked(app_for: Any) -> None:
    client, _ = app_for
    admin = client(["admin"])
    bad = {
        "name": "site",
        "kind": "web",
        "config": {"seeds": ["http://10.0.0.1/"], "allowed_hosts": ["docs.example.com"]},
    }
    reply = admin.post("/api/v1/admin/connectors", json=bad)
    assert reply.status_code == 422 and "allowed host" in reply.text
    mixed = {"name": "site", "kind": "web", "config": {"root": "/tmp"}}
    assert admin.post("/api/v1/admin/connectors", json=mixed).status_code == 422
    good = {
        "name": "docs-site",
        "kind": "web",
        "config": {"seeds": ["https://docs.example.com/"], "allowed_hosts": ["docs.example.com"], "max_depth": 1},
    }
    created = admin.post("/api/v1/admin/connectors", json=good)
    assert created.status_code == 201 and created.json()["config"]["max_depth"] == 1

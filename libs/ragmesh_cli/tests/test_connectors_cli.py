"""`ragmesh connectors` against a fake gateway (httpx.MockTransport): what it sends, prints and exits with."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from typer.testing import CliRunner

from ragmesh_cli.main import app

ENV = {"RAGMESH_URL": "http://gw.test", "RAGMESH_TOKEN": "tok", "COLUMNS": "250"}
CID = "11111111-2222-4333-8444-555555555555"
RID = "66666666-7777-4888-9999-000000000000"


def invoke(handler: Callable[[httpx.Request], Any], *args: str) -> Any:
    return CliRunner().invoke(app, list(args), obj={"transport": httpx.MockTransport(handler)}, env=ENV)


def connector(**fields: Any) -> dict[str, Any]:
    return {
        "connector_id": CID,
        "name": "team",
        "kind": "folder",
        "owner": "connector:team",
        "config": {"root": "/shares/team", "max_file_bytes": 10},
        "acl": {"public": False, "departments": ["eng"], "roles": [], "users": []},
        "schedule_seconds": 3600,
        "state": "active",
        "created_by": "root",
        "created_at": "2026-01-01T00:00:00+00:00",
        "next_run_at": None,
        "documents": 3,
        "last_run": {"status": "succeeded", "counts": {"new": 3}},
        **fields,
    }


def run_report(status: str, **counts: int) -> dict[str, Any]:
    return {
        "run_id": RID,
        "connector_id": CID,
        "trigger": "manual",
        "status": status,
        "queued_at": "2026-01-01T00:00:00+00:00",
        "started_at": None,
        "finished_at": None,
        "counts": counts,
        "problems": [{"key": "big.pdf", "reason": "skipped: larger than the connector's limit"}] if counts else [],
        "message": "",
    }


def test_add_folder_and_web_send_the_api_shape() -> None:
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/admin/connectors" and request.method == "POST"
        sent.append(json.loads(request.content))
        return httpx.Response(201, json=connector())

    folder = invoke(handler, "connectors", "add", "team", "--folder", "/shares/team", "--every", "3600", "--acl",
                    "departments=eng")  # fmt: skip
    assert folder.exit_code == 0, folder.output
    assert sent[0] == {
        "name": "team",
        "kind": "folder",
        "config": {"root": "/shares/team"},
        "schedule_seconds": 3600,
        "acl": {"departments": ["eng"]},
    }
    web = invoke(handler, "connectors", "add", "site", "--url", "https://docs.example.com/", "--depth", "1", "--json")
    assert web.exit_code == 0, web.output
    assert sent[1]["kind"] == "web" and sent[1]["config"]["allowed_hosts"] == ["docs.example.com"]
    assert sent[1]["config"]["max_depth"] == 1
    assert json.loads(web.output)["connector_id"] == CID
    both = invoke(handler, "connectors", "add", "x", "--folder", "/a", "--url", "https://b/")
    assert both.exit_code == 2 and "either --folder" in both.output and len(sent) == 2


def test_list_run_wait_and_runs() -> None:
    polls = iter(["running", "partial"])

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/v1/admin/connectors":
            return httpx.Response(200, json={"connectors": [connector()]})
        if path == f"/api/v1/admin/connectors/{CID}/runs" and request.method == "POST":
            return httpx.Response(202, json=run_report("queued"))
        if path == f"/api/v1/admin/connectors/{CID}/runs/{RID}":
            status = next(polls)
            return httpx.Response(
                200, json=run_report(status, new=2, skipped=1) if status != "running" else run_report(status)
            )
        if path == f"/api/v1/admin/connectors/{CID}/runs":
            return httpx.Response(200, json={"runs": [run_report("succeeded", new=2)]})
        return httpx.Response(404, json={"detail": "no such connector"})

    listed = invoke(handler, "connectors", "list")
    assert listed.exit_code == 0 and "team" in listed.output and "/shares/team" in listed.output
    ran = invoke(handler, "connectors", "run", "team", "--wait")
    assert ran.exit_code == 1, ran.output  # partial: a problem to look at
    assert "2 new" in ran.output and "big.pdf" in ran.output
    history = invoke(handler, "--json", "connectors", "runs", CID)
    assert history.exit_code == 0 and json.loads(history.output)["runs"][0]["counts"] == {"new": 2}
    unknown = invoke(handler, "connectors", "runs", "nope")
    assert unknown.exit_code == 1 and "no connector named 'nope'" in unknown.output


def test_a_non_admin_gets_the_api_error() -> None:
    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json={"detail": "admin role required"})

    result = invoke(handler, "connectors", "list")
    assert result.exit_code == 1 and "admin role required" in result.output

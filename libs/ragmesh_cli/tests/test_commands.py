"""The commands against a fake gateway (httpx.MockTransport): what they send, print and exit with."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from typer.testing import CliRunner

from ragmesh_cli.main import app

DOC_ID = "0b5a3a52-8d8e-4a43-9d5c-7b1f8f0e0a01"
ENV = {"RAGMESH_URL": "http://gw.test", "RAGMESH_TOKEN": "tok", "COLUMNS": "250"}


def invoke(handler: Callable[[httpx.Request], Any], *args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(
        app, list(args), obj={"transport": httpx.MockTransport(handler)}, env={**ENV, **(env or {})}
    )


def sse(*events: tuple[str, dict[str, Any]]) -> httpx.Response:
    text = ": ping\n\n" + "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=text)


def document(document_id: str = DOC_ID, **fields: Any) -> dict[str, Any]:
    return {
        "document_id": document_id,
        "title": "Guide",
        "filename": "guide.md",
        "mime_type": "text/markdown",
        "owner_user": "dana",
        "owner_department": "ops",
        "status": "ready",
        "error": "",
        "chunk_count": 7,
        "page_count": 0,
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "summary": "",
        "size_bytes": 10,
        "acl": {"public": False, "departments": ["ops"], "roles": [], "users": []},
        **fields,
    }


# ---------- ingest ----------
def test_ingest_uploads_follows_and_summarizes(tmp_path: Path) -> None:
    for name in ("good.md", "bad.txt", "same.md", "logo.png"):
        (tmp_path / name).write_text(name)
    ids = {"good.md": "id-good", "bad.txt": "id-bad", "same.md": "id-same"}
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == "Bearer tok"
        path = request.url.path
        if request.method == "POST" and path == "/api/v1/documents":
            body = request.content.decode()
            name = next(n for n in ids if f'filename="{n}"' in body)
            sent.append({"name": name, "acl": '{"departments": ["ops"], "users": ["erin"]}' in body})
            if name == "same.md":  # identical bytes uploaded before: the existing document, 200
                return httpx.Response(200, json={**document(ids[name]), "duplicate": True})
            return httpx.Response(202, json={**document(ids[name], status="queued"), "events_url": "x"})
        if path == "/api/v1/documents/id-good/events":
            return sse(
                ("status", {"document_id": "id-good", "status": "queued"}),
                ("status", {"document_id": "id-good", "status": "parsing"}),
                ("status", {"document_id": "id-good", "status": "ready"}),
            )
        if path == "/api/v1/documents/id-bad/events":
            return sse(("status", {"document_id": "id-bad", "status": "failed", "error": "no text"}))
        if path == "/api/v1/documents/id-good":
            return httpx.Response(200, json=document("id-good", chunk_count=3))
        if path == "/api/v1/documents/id-bad":
            return httpx.Response(200, json=document("id-bad", status="failed", error="no extractable text"))
        if path == "/api/v1/formats":  # asked once; logo.png is then skipped without an upload
            return httpx.Response(200, json={"extensions": [".md", ".txt"]})
        return httpx.Response(404, json={"detail": "Not Found"})

    result = invoke(handler, "ingest", str(tmp_path), "--wait", "--acl", "departments=ops;users=erin")
    assert result.exit_code == 1, result.output  # one document failed
    assert sorted(s["name"] for s in sent) == ["bad.txt", "good.md", "same.md"] and all(s["acl"] for s in sent)
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if "│" in line}
    assert "ready" in rows[str(tmp_path / "good.md")] and "3 chunks" in rows[str(tmp_path / "good.md")]
    assert "failed" in rows[str(tmp_path / "bad.txt")] and "no extractable text" in rows[str(tmp_path / "bad.txt")]
    assert "duplicate" in rows[str(tmp_path / "same.md")] and "id-same" in rows[str(tmp_path / "same.md")]
    assert "skipped" in rows[str(tmp_path / "logo.png")]
    assert "skipping" in result.stderr and "logo.png" in result.stderr
    assert "1 duplicate · 1 failed · 1 ready · 1 skipped" in result.stdout


def test_ingest_counts_many_skipped_files_per_reason_and_prints_no_empty_table(tmp_path: Path) -> None:
    """A folder of ground-truth files beside the documents: the skipped ones are counted per extension, not listed
    one line each, and a run past SUMMARY_ROWS files with nothing wrong prints its counts on one line, no table."""
    from ragmesh_cli import render

    for i in range(render.SUMMARY_ROWS):
        (tmp_path / f"doc{i}.md").write_text(f"doc {i}")
        (tmp_path / f"doc{i}.md.json").write_text("{}")
    (tmp_path / "notes.itxt").write_text("x")
    made: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/formats":
            return httpx.Response(200, json={"extensions": [".md"]})
        if request.method == "POST":
            made.append(f"id-{len(made)}")
            return httpx.Response(202, json=document(made[-1], status="queued"))
        return httpx.Response(404, json={"detail": "Not Found"})

    result = invoke(handler, "ingest", str(tmp_path), str(tmp_path / "missing.md"))
    assert result.exit_code == 1, result.output  # the missing path is an error
    skipping = [line for line in result.stderr.splitlines() if line.startswith("skipping")]
    assert f"skipping {render.SUMMARY_ROWS} files: unsupported extension .json" in skipping
    assert "skipping 1 file: unsupported extension .itxt" in skipping
    assert any("missing.md: no such file or folder" in line for line in skipping) and len(skipping) == 3
    assert f"ingest: 1 error · {render.SUMMARY_ROWS} queued · 201 skipped (listing the 1 not ok)" in result.stdout
    assert "missing.md" in result.stdout  # the one row not ok

    (tmp_path / "notes.itxt").unlink()
    made.clear()
    result = invoke(handler, "ingest", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "(all ok; --json lists each file)" in result.stdout and "│" not in result.stdout and "┃" not in result.stdout


def test_ingest_polls_where_there_is_no_events_stream_and_json_output(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("a")
    polls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(202, json=document("id-a", status="queued"))
        if request.url.path.endswith("/events"):
            return httpx.Response(405, json={"detail": "Method Not Allowed"})
        polls.append(request.url.path)
        return httpx.Response(200, json=document("id-a", status="ready" if len(polls) > 1 else "embedding"))

    result = invoke(handler, "ingest", str(tmp_path / "a.md"), "--wait", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"path": str(tmp_path / "a.md"), "status": "ready", "document_id": "id-a", "reason": "7 chunks"}
    ]
    assert len(polls) >= 2


def test_ingest_uploads_at_most_concurrency_at_once(tmp_path: Path) -> None:
    for i in range(12):
        (tmp_path / f"f{i}.txt").write_text(str(i))
    in_flight, peak = 0, 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return httpx.Response(202, json=document(status="queued"))

    result = CliRunner().invoke(
        app, ["ingest", str(tmp_path), "--concurrency", "3"], env=ENV, obj={"transport": httpx.MockTransport(handler)}
    )
    assert result.exit_code == 0, result.output
    assert "ingest: 12 queued" in result.stdout
    assert 1 < peak <= 3


def test_ingest_reports_refusals_and_bad_acl(tmp_path: Path) -> None:
    (tmp_path / "big.pdf").write_bytes(b"%PDF-1.4")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(413, json={"detail": "big.pdf is larger than 10 bytes"})

    result = invoke(handler, "ingest", str(tmp_path))
    assert result.exit_code == 1
    assert "HTTP 413: big.pdf is larger than 10 bytes" in result.stdout
    result = invoke(handler, "ingest", str(tmp_path), "--acl", '{"department": ["eng"]}')
    assert result.exit_code == 2 and "unknown key 'department'" in result.stderr
    result = invoke(handler, "ingest", str(tmp_path / "nothing-here"))
    assert result.exit_code == 1 and "no supported files" in result.stderr


def test_ingest_skips_files_already_ingested_by_content_and_uploads_the_rest(tmp_path: Path) -> None:
    """A rerun asks which contents are already the caller's documents and sends only the others; a content
    whose document failed is sent again."""
    contents = {"done.md": "done", "broken.md": "broken", "new.md": "new", "also-new.md": "also new"}
    for name, text in contents.items():
        (tmp_path / name).write_text(text)
    sha = {name: hashlib.sha256(text.encode()).hexdigest() for name, text in contents.items()}
    lookups: list[dict[str, Any]] = []
    uploaded: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/documents/lookup":
            lookups.append(json.loads(request.content))
            return httpx.Response(
                200,
                json={
                    "documents": [
                        document("id-done", content_sha256=sha["done.md"]),
                        document("id-broken", status="failed", content_sha256=sha["broken.md"]),
                        document("id-other", content_sha256="f" * 64),  # not asked for: ignored
                    ],
                    "total": 3,
                    "next_cursor": "",
                },
            )
        if request.method == "POST" and request.url.path == "/api/v1/documents":
            uploaded.append(next(n for n in contents if f'filename="{n}"' in request.content.decode()))
            return httpx.Response(202, json=document("id-x", status="queued"))
        return httpx.Response(404, json={"detail": "Not Found"})

    result = invoke(handler, "ingest", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    assert len(lookups) == 1 and lookups[0]["mine"] is True
    assert sorted(lookups[0]["content_sha256"]) == sorted(sha.values())
    assert sorted(uploaded) == ["also-new.md", "broken.md", "new.md"]
    by_name = {Path(o["path"]).name: o for o in json.loads(result.stdout)}
    assert by_name["done.md"]["status"] == "present" and by_name["done.md"]["document_id"] == "id-done"
    assert {by_name[n]["status"] for n in ("broken.md", "new.md", "also-new.md")} == {"queued"}


def test_ingest_waits_and_retries_when_the_gateway_is_busy(tmp_path: Path) -> None:
    """429 / 503 with Retry-After pause the run and the upload is sent again; a 503 without it is the file's error."""
    for i in range(4):
        (tmp_path / f"f{i}.txt").write_text(f"text {i}")
    attempts: dict[str, int] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/documents/lookup":
            attempts["lookup"] = attempts.get("lookup", 0) + 1
            if attempts["lookup"] == 1:
                return httpx.Response(503, headers={"Retry-After": "0"}, json={"detail": "busy"})
            return httpx.Response(200, json={"documents": [], "total": 0, "next_cursor": ""})
        if request.url.path != "/api/v1/documents":
            return httpx.Response(404, json={"detail": "Not Found"})
        name = next(f"f{i}.txt" for i in range(4) if f'filename="f{i}.txt"' in request.content.decode())
        attempts[name] = attempts.get(name, 0) + 1
        if name == "f0.txt" and attempts[name] <= 2:
            return httpx.Response(429, headers={"Retry-After": "0.05"}, json={"detail": "slow down"})
        if name == "f1.txt" and attempts[name] == 1:
            return httpx.Response(503, headers={"Retry-After": "0"}, json={"detail": "queue full"})
        if name == "f2.txt":
            return httpx.Response(503, json={"detail": "parser: unavailable"})
        return httpx.Response(202, json=document(f"id-{name}", status="queued"))

    result = invoke(handler, "ingest", str(tmp_path), "--json")
    assert result.exit_code == 1, result.output  # f2's 503 without Retry-After
    by_name = {Path(o["path"]).name: o for o in json.loads(result.stdout)}
    assert attempts["lookup"] == 2
    assert attempts["f0.txt"] == 3 and attempts["f1.txt"] == 2 and attempts["f3.txt"] == 1
    assert [by_name[f"f{i}.txt"]["status"] for i in range(4)] == ["queued", "queued", "error", "queued"]
    assert by_name["f2.txt"]["reason"] == "HTTP 503: parser: unavailable"


def test_ingest_sends_an_upload_again_after_a_broken_connection(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A refused or reset connection is tried again (the server answers the same bytes as a duplicate if the first
    try got through); after the last try the file is an error naming the gateway."""
    for name in ("flaky.txt", "down.txt"):
        (tmp_path / name).write_text(name)
    tries: dict[str, int] = {}
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", sleep)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/api/v1/documents":
            return httpx.Response(404, json={"detail": "Not Found"})
        name = "flaky.txt" if 'filename="flaky.txt"' in request.content.decode() else "down.txt"
        tries[name] = tries.get(name, 0) + 1
        if name == "down.txt" or tries[name] <= 2:
            raise httpx.ConnectError("connection refused")
        return httpx.Response(202, json=document("id-flaky", status="queued"))

    result = invoke(handler, "ingest", str(tmp_path), "--json")
    assert result.exit_code == 1, result.output
    by_name = {Path(o["path"]).name: o for o in json.loads(result.stdout)}
    assert by_name["flaky.txt"]["status"] == "queued" and tries["flaky.txt"] == 3
    assert by_name["down.txt"]["status"] == "error" and tries["down.txt"] == 4
    assert "cannot reach http://gw.test" in by_name["down.txt"]["reason"] and sorted(waits) == [1, 1, 2, 2, 4]


def _signal_ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def _second_ctrl_c() -> None:
    raise KeyboardInterrupt  # what the command's handler raises on a second Ctrl-C


@pytest.mark.parametrize(
    ("interrupt", "done"),
    [
        # the first Ctrl-C (a real SIGINT): the upload in flight finishes and is listed, no new one starts
        (_signal_ctrl_c, ["id-1", "id-2", "id-3", "id-4"]),
        # a second Ctrl-C: the run ends at once, the upload in flight is not listed
        (_second_ctrl_c, ["id-1", "id-2", "id-3"]),
    ],
    ids=["first-ctrl-c", "second-ctrl-c"],
)
def test_ingest_interrupted_during_the_fourth_upload_stops_with_a_summary_and_exit_130(
    tmp_path: Path, interrupt: Callable[[], None], done: list[str]
) -> None:
    """Ctrl-C during the fourth upload: what finished is listed (after the first Ctrl-C, every document the run
    created), no fifth upload starts, the rest is said to be left for a rerun, no traceback, exit code 130, and
    the command's own SIGINT handling ends with it."""
    for i in range(6):
        (tmp_path / f"f{i}.txt").write_text(f"text {i}")
    uploads: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/documents":
            uploads.append(request.url.path)
            if len(uploads) == 4:
                interrupt()
            return httpx.Response(202, json=document(f"id-{len(uploads)}", status="queued"))
        return httpx.Response(404, json={"detail": "Not Found"})

    before = signal.getsignal(signal.SIGINT)
    result = invoke(handler, "ingest", str(tmp_path), "--concurrency", "1", "--json")
    assert result.exit_code == 130, result.output
    assert [o["document_id"] for o in json.loads(result.stdout)] == done
    assert f"interrupted: {len(done)} of 6 files done" in result.stderr and "Traceback" not in result.output
    assert len(uploads) == 4  # nothing was sent after the interrupt
    assert signal.getsignal(signal.SIGINT) is before


# ---------- ask / search ----------
FINAL = {
    "outcome": "answer",
    "answer": "IBM was founded in 1911.",
    "citations": [],
    "grounding_score": 0.91,
    "grounded": True,
    "verified": True,
    "withheld": False,
    "warnings": ["one sentence is unsupported"],
    "notes": ['Your question was read with your documents\' spelling: "fonded" as "founded".'],
    "degraded": [{"step": "graph", "reason": "graph unavailable"}],
    "trace_id": "ab" * 16,
    "sources": [
        {
            "index": 1,
            "document_id": DOC_ID,
            "chunk_id": "c1",
            "title": "IBM",
            "section_path": ["History", "Founding"],
            "page": 3,
            "cited": True,
            "snippet": "…",
        },
        {
            "index": 2,
            "document_id": DOC_ID,
            "chunk_id": "c2",
            "title": "IBM",
            "section_path": [],
            "page": None,
            "cited": False,
            "snippet": "…",
        },
    ],
}


def test_ask_streams_verified_sentences_then_sources_and_verification() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/chat"
        seen.append(json.loads(request.content))
        return sse(
            ("progress", {"stage": "retrieve", "status": "done"}),
            ("progress", {"stage": "answer", "status": "queued", "position": 2, "estimated_wait_s": 1.5}),
            ("sentence", {"index": 0, "text": "IBM was founded in 1911.", "sources": [1], "extractive": False}),
            ("final", FINAL),
        )

    result = invoke(handler, "ask", "When was IBM founded?", "-d", DOC_ID)
    assert result.exit_code == 0, result.output
    assert seen == [
        {"question": "When was IBM founded?", "stream": True, "top_k": 5, "document_ids": [DOC_ID], "graph": True}
    ]
    out = result.stdout
    assert out.startswith("IBM was founded in 1911.\n")
    assert "[1] IBM › History › Founding, p. 3 (cited)" in out and "[2] IBM\n" in out
    assert "grounded (0.91)" in out and "verified" in out
    assert "warning one sentence is unsupported" in out and "degraded graph: graph unavailable" in out
    assert 'note Your question was read with your documents\' spelling: "fonded" as "founded".' in out
    assert "queued at position 2" in result.stderr


def test_ask_shows_a_lists_items_a_line_each_once() -> None:
    items = ["- Finalize pricing model [1]", "- Launch APAC campaign [1]"]

    def handler(request: httpx.Request) -> httpx.Response:
        sentences = [
            ("sentence", {"index": n, "text": t, "sources": [1], "extractive": True}) for n, t in enumerate(items)
        ]
        return sse(*sentences, ("final", {**FINAL, "answer": "\n".join(items)}))

    result = invoke(handler, "ask", "What are the next steps?")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("- Finalize pricing model [1]\n- Launch APAC campaign [1]\n")
    assert result.stdout.count("Finalize pricing model") == 1


def test_ask_never_shows_a_draft_that_verification_withheld() -> None:
    withheld = {
        **FINAL,
        "answer": 'I could not verify an answer in your documents. What they say (unverified, check the sources):\n> "x" [1]',
        "verified": False,
        "grounded": False,
        "withheld": True,
        "draft": "PWNED",
    }

    def handler(request: httpx.Request) -> httpx.Response:
        # a draft token (sent only to clients that ask for stream_draft) must not reach the screen either
        return sse(("token", {"text": "PWNED"}), ("final", withheld))

    result = invoke(handler, "ask", "When was IBM founded?")
    assert result.exit_code == 0, result.output
    assert "PWNED" not in result.stdout
    assert result.stdout.startswith("I could not verify an answer") and "answer withheld" in result.stdout


def test_ask_error_event_and_refusal_are_one_line_and_exit_1() -> None:
    def mid_stream(request: httpx.Request) -> httpx.Response:
        return sse(
            ("token", {"text": "IBM"}), ("error", {"step": "answer", "message": "answerer unavailable", "status": 503})
        )

    result = invoke(mid_stream, "ask", "q")
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: HTTP 503: answer: answerer unavailable"

    def busy(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            503,
            json={"detail": {"step": "answer", "message": "answerer busy", "status": 503}},
            headers={"Retry-After": "5"},
        )

    result = invoke(busy, "ask", "q")
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: HTTP 503: answer: answerer busy (retry after 5 s)"


def test_search_table_and_json() -> None:
    body = {
        "results": [
            {**FINAL["sources"][0], "snippet": "IBM was founded in 1911 in Endicott", "scores": {"score": 0.8123}}
        ],
        "accessible_documents": 4,
        "degraded": [],
        "progress": [],
    }

    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content) == {"query": "ibm", "top_k": 3, "rerank": True, "document_ids": []}
        return httpx.Response(200, json=body)

    result = invoke(handler, "search", "ibm", "--top-k", "3", "--rerank")
    assert result.exit_code == 0, result.output
    assert "0.812" in result.stdout and "IBM › History › Founding, p. 3" in result.stdout
    assert "1 results (4 documents readable)" in result.stdout
    result = invoke(handler, "search", "ibm", "--top-k", "3", "--rerank", "--json")
    assert json.loads(result.stdout) == body


@pytest.mark.parametrize(
    "line",
    [
        ["--json", "search", "ibm", "--top-k", "3", "--rerank"],
        ["--url", "http://gw.example:8080", "--json", "search", "ibm", "--top-k", "3", "--rerank"],
        ["search", "--json", "ibm", "--top-k", "3", "--rerank"],
        ["search", "ibm", "--top-k", "3", "--json", "--rerank"],
    ],
)
def test_json_is_accepted_anywhere_on_the_line(line: list[str]) -> None:
    body = {"results": [], "accessible_documents": 0, "degraded": [], "progress": []}
    result = invoke(lambda request: httpx.Response(200, json=body), *line)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == body


def test_json_anywhere_reaches_nested_commands_and_is_refused_by_a_command_without_json_output() -> None:
    listing = {"documents": [document()], "total": 1}
    for line in (["--json", "docs", "list"], ["docs", "--json", "list"], ["docs", "list", "--json"]):
        result = invoke(lambda request: httpx.Response(200, json=listing), *line)
        assert result.exit_code == 0, (line, result.output)
        assert json.loads(result.stdout) == listing
    result = invoke(lambda request: httpx.Response(200, json={}), "--json", "token", "--user", "alice")
    assert result.exit_code == 2 and "--json" in result.output
    # after `--` it is an argument like any other: the query text "--json"
    queries: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        queries.append(json.loads(request.content)["query"])
        return httpx.Response(200, json=body_empty)

    body_empty = {"results": [], "accessible_documents": 0, "degraded": [], "progress": []}
    result = invoke(handler, "search", "--json", "--", "--json")
    assert result.exit_code == 0, result.output
    assert queries == ["--json"] and json.loads(result.stdout) == body_empty


# ---------- graph ----------
def test_graph_shows_the_best_match_and_says_when_nothing_matches() -> None:
    detail = {
        "entity": {"id": "aWJt", "name": "IBM", "type": "ORG", "mentions": 2, "chunk_ids": ["d1:0", "d1:3"]},
        "neighbours": [{"id": "ZW5kaWNvdHQ", "name": "Endicott", "type": "GPE", "mentions": 1, "chunk_ids": []}],
        "facts": [{"source": "IBM", "relation": "found in", "target": "Endicott", "chunk_ids": ["d1:0"]}],
        "mentions": [{"document_id": "d1", "chunk_id": "d1:0"}, {"document_id": "d1", "chunk_id": "d1:3"}],
        "communities": [{"id": "0.2", "level": 0, "title": "IBM · Endicott", "size": 5}],
    }
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(f"{request.url.path}?{request.url.query.decode()}")
        if request.url.path == "/api/v1/graph/entities":
            found = [detail["entity"], {**detail["neighbours"][0], "name": "IBM Research"}]
            return httpx.Response(200, json={"entities": found if request.url.params["q"] == "ibm" else []})
        return httpx.Response(200, json=detail)

    result = invoke(handler, "graph", "ibm")
    assert result.exit_code == 0, result.output
    assert asked == ["/api/v1/graph/entities?q=ibm&limit=10", "/api/v1/graph/entities/aWJt?"]
    for shown in ("IBM", "found in", "Endicott", "community 0.2", "d1:3", "also matching: IBM Research"):
        assert shown in result.stdout, shown
    assert json.loads(invoke(handler, "graph", "ibm", "--json").stdout)["entity"]["name"] == "IBM"
    missing = invoke(handler, "graph", "nothing")
    assert missing.exit_code == 1 and "no entity matching 'nothing'" in missing.output


# ---------- docs ----------
def test_docs_list_passes_filters_and_notes_a_server_that_ignores_them() -> None:
    params: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        params.append(dict(request.url.params))
        return httpx.Response(200, json={"documents": [document(), document("id-2", status="failed")], "total": 2})

    result = invoke(handler, "docs", "list", "--status", "failed", "--updated-since", "2026-01-01T00:00:00Z")
    assert result.exit_code == 0, result.output
    assert params == [{"status": "failed", "updated_since": "2026-01-01T00:00:00Z", "limit": "100"}]
    assert "2 of 2 documents" in result.stdout and DOC_ID in result.stdout
    assert "ignored --status" in result.stderr
    result = invoke(handler, "docs", "list", "--json")
    assert json.loads(result.stdout)["total"] == 2 and "ignored" not in result.stderr


def test_docs_list_keeps_ids_whole_and_shows_the_format_as_docs_list_filters_it() -> None:
    """On an 80-column console (a pipe) the id stays on one line and owner and time are left out; a wide console
    shows them, the time to the minute in UTC; the next page's cursor is one line, to copy."""
    long_title = "Quarterly report of the northern region " * 2

    def handler(request: httpx.Request) -> httpx.Response:
        rows = [document(title=long_title, filename="q3.XLSX", updated_at="2026-11-27T21:37:08.83+01:00")]
        return httpx.Response(200, json={"documents": rows, "total": 9, "next_cursor": "c" * 120})

    narrow = invoke(handler, "docs", "list", env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.output
    row = next(line for line in narrow.stdout.splitlines() if DOC_ID in line)
    assert row.split()[-3:] == ["ready", "7", "xlsx"] and "dana" not in narrow.stdout
    assert all(len(line) <= 80 for line in narrow.stdout.splitlines() if "c" * 20 not in line)
    assert f"next page: --cursor {'c' * 120}" in narrow.stdout.splitlines()
    wide = invoke(handler, "docs", "list", env={"COLUMNS": "160"})
    row = next(line for line in wide.stdout.splitlines() if DOC_ID in line)
    assert row.split()[-6:] == ["ready", "7", "xlsx", "dana", "2026-11-27", "20:37"]


def test_docs_show_with_and_without_the_chunks_endpoint() -> None:
    chunks = {
        "chunks": [
            {
                "level": "paragraph",
                "section_path": ["Intro"],
                "page": 1,
                "token_count": 42,
                "text": "The first paragraph.",
            }
        ],
        "next_cursor": "c2",
    }

    def with_chunks(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/chunks"):
            assert dict(request.url.params) == {"limit": "5"}
            return httpx.Response(200, json=chunks)
        return httpx.Response(200, json=document())

    result = invoke(with_chunks, "docs", "show", DOC_ID, "--limit", "5")
    assert result.exit_code == 0, result.output
    assert "Guide" in result.stdout and "departments: ops" in result.stdout
    assert "The first paragraph." in result.stdout and "--cursor c2" in result.stdout
    result = invoke(with_chunks, "docs", "show", DOC_ID, "--limit", "5", "--json")
    assert json.loads(result.stdout) == {"document": document(), "chunks": chunks}

    def without(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/chunks"):
            return httpx.Response(404, json={"detail": "Not Found"})
        return httpx.Response(200, json=document())

    result = invoke(without, "docs", "show", DOC_ID)
    assert result.exit_code == 0, result.output
    assert "chunks: not available on this server" in result.stdout

    def missing(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"detail": f"document {DOC_ID} not found"})

    result = invoke(missing, "docs", "show", DOC_ID)
    assert result.exit_code == 1 and result.stderr.strip() == f"error: HTTP 404: document {DOC_ID} not found"


def test_docs_rm_tries_each_and_fails_if_any_failed() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.method == "DELETE"
        if request.url.path.endswith("/gone"):
            return httpx.Response(403, json={"detail": "only the owner may delete"})
        return httpx.Response(200, json={"document_id": DOC_ID, "deleted": True, "warnings": ["graph cleanup pending"]})

    result = invoke(handler, "docs", "rm", "gone", DOC_ID)
    assert result.exit_code == 1
    assert f"deleted {DOC_ID}" in result.stdout
    assert "error: gone: HTTP 403: only the owner may delete" in result.stderr
    assert "graph cleanup pending" in result.stderr


def test_docs_reingest_queues_each_and_fails_if_any_failed() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.method == "POST"
        calls.append(request.url.path)
        if "/gone/" in request.url.path:
            return httpx.Response(409, json={"detail": "the stored file of version 1 is gone"})
        return httpx.Response(202, json={**document(status="queued"), "note": "re-ingest of version 2 queued"})

    result = invoke(handler, "docs", "reingest", "gone", DOC_ID)
    assert result.exit_code == 1
    assert calls == ["/api/v1/documents/gone/reingest", f"/api/v1/documents/{DOC_ID}/reingest"]
    assert f"{DOC_ID}: re-ingest of version 2 queued" in result.stdout
    assert "error: gone: HTTP 409: the stored file of version 1 is gone" in result.stderr
    assert invoke(handler, "docs", "reingest", DOC_ID).exit_code == 0


def test_docs_reingest_stale_pages_through_your_stale_documents() -> None:
    """`docs reingest --stale`: every page of your documents an older parser read, each re-ingested; none: said so.
    `docs list --stale --mine` passes the filters on."""
    pages = {"": (["s1", "s2"], "next"), "next": (["s3"], "")}
    listed: list[dict[str, str]] = []
    posted: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            params = dict(request.url.params)
            listed.append(params)
            ids, following = pages[params.get("cursor", "")]
            docs = [document(i, parser_version=0) for i in ids]
            return httpx.Response(200, json={"documents": docs, "total": 3, "next_cursor": following})
        posted.append(request.url.path.split("/")[-2])
        return httpx.Response(202, json={**document(status="queued"), "note": "re-ingest of version 2 queued"})

    result = invoke(handler, "docs", "reingest", "--stale")
    assert result.exit_code == 0, result.output
    assert posted == ["s1", "s2", "s3"] and "re-ingesting 3 documents" in result.stdout
    assert all((p["stale"], p["mine"]) == ("true", "true") for p in listed) and len(listed) == 2
    pages[""] = ([], "")
    posted.clear()
    result = invoke(handler, "docs", "reingest", "--stale")
    assert result.exit_code == 0 and posted == [] and "no stale documents" in result.stdout
    assert invoke(handler, "docs", "reingest").exit_code == 2  # neither ids nor --stale
    listed.clear()
    assert invoke(handler, "docs", "list", "--stale", "--mine").exit_code == 0
    assert (listed[0]["stale"], listed[0]["mine"]) == ("true", "true")


# ---------- traces / auth ----------
def test_traces_list_show_and_refusal() -> None:
    spans = {
        "trace_id": "ab" * 16,
        "spans": [
            {
                "span_id": "2",
                "parent_span_id": "1",
                "name": "retrieve",
                "service": "retriever",
                "start_time": "2026-01-01T00:00:01Z",
                "duration_ms": 12.5,
                "status_code": "OK",
            },
            {
                "span_id": "1",
                "parent_span_id": None,
                "name": "POST /api/v1/chat",
                "service": "gateway",
                "start_time": "2026-01-01T00:00:00Z",
                "duration_ms": 40.0,
                "status_code": "ERROR",
                "status_message": "boom",
            },
        ],
    }

    def handler(request: httpx.Request) -> httpx.Response:
        if request.headers["authorization"] != "Bearer admin":
            return httpx.Response(403, json={"detail": "admin role required"})
        if request.url.path == "/api/v1/traces":
            assert dict(request.url.params) == {"limit": "5", "hours": "24"}
            return httpx.Response(
                200,
                json={
                    "traces": [
                        {
                            "trace_id": "ab" * 16,
                            "start_time": "t",
                            "duration_ms": 40,
                            "span_count": 2,
                            "services": [],
                            "has_error": True,
                        }
                    ]
                },
            )
        return httpx.Response(200, json=spans)

    result = invoke(handler, "--token", "admin", "traces", "--limit", "5")
    assert result.exit_code == 0, result.output
    assert "ab" * 16 in result.stdout and "1 traces" in result.stdout
    result = invoke(handler, "--token", "admin", "traces", "show", "AB" * 16)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if "│" in line]
    assert "POST /api/v1/chat" in lines[0] and "ERROR: boom" in lines[0] and "  retrieve" in lines[1]
    result = invoke(handler, "traces")
    assert result.exit_code == 1 and result.stderr.strip() == "error: HTTP 403: admin role required"


def test_a_bad_token_is_one_clear_line() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            401, json={"detail": "invalid token: Signature verification failed"}, headers={"WWW-Authenticate": "Bearer"}
        )

    result = invoke(handler, "docs", "list")
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: HTTP 401: invalid token: Signature verification failed"
    assert result.stdout == ""


def test_token_mints_the_gateways_dev_jwt(tmp_path: Path) -> None:
    (tmp_path / "jwt-dev-secret").write_text("s" * 40 + "\n")
    result = CliRunner().invoke(
        app,
        ["token", "--user", "dana", "--department", "ops", "--roles", "employee, admin", "--data-dir", str(tmp_path)],
        env={"GATEWAY_JWT_SECRET": ""},
    )
    assert result.exit_code == 0, result.output
    claims = jwt.decode(result.stdout.strip(), "s" * 40, algorithms=["HS256"])
    assert (claims["sub"], claims["department"], claims["roles"]) == ("dana", "ops", ["employee", "admin"])
    result = CliRunner().invoke(
        app, ["token", "--user", "dana", "--data-dir", str(tmp_path / "none")], env={"GATEWAY_JWT_SECRET": ""}
    )
    assert result.exit_code == 1 and "no dev signing key" in result.stderr


def test_cache_stats_and_clear_for_admins() -> None:
    stats = {"enabled": True, "hits": 3, "misses": 1, "refused": 0, "stores": 2, "invalidated": 1, "errors": 0}
    stats |= {"cleared": 0, "entries": 2, "hit_rate": 0.75}
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        if request.headers["authorization"] != "Bearer admin":
            return httpx.Response(403, json={"detail": "admin role required"})
        assert request.url.path == "/api/v1/admin/cache"
        if request.method == "DELETE":
            return httpx.Response(200, json={"cleared": 2})
        return httpx.Response(200, json=stats)

    result = invoke(handler, "--token", "admin", "cache")
    assert result.exit_code == 0, result.output
    assert "2 entries; hit rate 75.0% (3 hits, 1 misses)" in result.stdout
    result = invoke(handler, "--token", "admin", "cache", "clear")
    assert result.exit_code == 0 and "2 cached answers dropped" in result.stdout and calls[-1] == "DELETE"
    result = invoke(handler, "cache", "clear")
    assert result.exit_code == 1 and result.stderr.strip() == "error: HTTP 403: admin role required"

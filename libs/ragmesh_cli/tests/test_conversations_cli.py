"""`ragmesh chat` and `ragmesh conversations` against a fake gateway: a chat keeps one conversation and rates
its last answer; list/show/rm; the export writes rated turns as JSON Lines and leaves withdrawn ones out."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))  # the command tests' helpers (tests run in importlib mode)
from test_commands import ENV, invoke, sse

from ragmesh_cli.main import app

CID = "5f0c3a52-8d8e-4a43-9d5c-7b1f8f0e0a01"


def final(answer: str, message_id: str) -> dict[str, Any]:
    return {
        "outcome": "answer",
        "answer": answer,
        "sources": [],
        "citations": [],
        "warnings": [],
        "degraded": [],
        "accessible_documents": 1,
        "trace_id": "t" * 32,
        "notes": [],
        "ingesting_documents": 0,
        "conversation_id": CID,
        "message_id": message_id,
    }


def test_chat_keeps_one_conversation_and_rates_the_last_answer() -> None:
    chats: list[dict[str, Any]] = []
    rated: list[tuple[str, dict[str, Any]]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "POST" and path == "/api/v1/conversations":
            return httpx.Response(201, json={"conversation_id": CID, "title": ""})
        if path == "/api/v1/chat":
            body = json.loads(request.content)
            chats.append(body)
            return sse(
                ("token", {"text": f"answer {len(chats)}"}), ("final", final(f"answer {len(chats)}", f"m{len(chats)}"))
            )
        if path.endswith("/feedback"):
            rated.append((path, json.loads(request.content)))
            return httpx.Response(200, json={})
        return httpx.Response(404, json={"detail": "not found"})

    result = CliRunner().invoke(
        app,
        ["chat"],
        obj={"transport": httpx.MockTransport(handler)},
        env=ENV,
        input="When was IBM founded?\nWhere is it?\n/down wrong city\n\n",
    )
    assert result.exit_code == 0, result.output
    assert [c["conversation_id"] for c in chats] == [CID, CID]  # one conversation, no history sent
    assert all("history" not in c for c in chats)
    assert rated == [(f"/api/v1/conversations/{CID}/messages/m2/feedback", {"rating": "down", "comment": "wrong city"})]
    assert "answer 2" in result.output


def test_conversations_list_show_rm_and_a_foreign_id() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/v1/conversations":
            return httpx.Response(
                200,
                json={
                    "conversations": [
                        {
                            "conversation_id": CID,
                            "title": "IBM",
                            "message_count": 2,
                            "updated_at": "2026-01-01T00:00:00+00:00",
                            "created_at": "",
                        }
                    ],
                    "next_cursor": "",
                },
            )
        if path == f"/api/v1/conversations/{CID}" and request.method == "GET":
            return httpx.Response(
                200,
                json={
                    "conversation_id": CID,
                    "title": "IBM",
                    "messages": [
                        {
                            "question": "q1",
                            "answer": "",
                            "withdrawn": True,
                            "note": "no longer available",
                            "time": "t",
                            "trace_id": "x",
                            "sources": [],
                        },
                        {
                            "question": "q2",
                            "answer": "Armonk",
                            "withdrawn": False,
                            "time": "t",
                            "trace_id": "y",
                            "sources": [],
                            "feedback": None,
                        },
                    ],
                },
            )
        if path == f"/api/v1/conversations/{CID}" and request.method == "DELETE":
            return httpx.Response(200, json={"conversation_id": CID, "deleted": True})
        return httpx.Response(404, json={"detail": "conversation not found"})

    listed = invoke(handler, "conversations", "list")
    assert listed.exit_code == 0 and CID in listed.output and "IBM" in listed.output
    shown = invoke(handler, "conversations", "show", CID)
    assert shown.exit_code == 0 and "no longer available" in shown.output and "Armonk" in shown.output
    removed = invoke(handler, "conversations", "rm", CID, "00000000-0000-4000-8000-000000000000")
    assert removed.exit_code == 1 and f"deleted {CID}" in removed.output and "404" in removed.output


def test_export_writes_rated_turns_and_leaves_withdrawn_ones_out(tmp_path: Path) -> None:
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        source = {
            "document_id": "d1",
            "title": "Wiki",
            "chunk_id": "c1",
            "section_path": [],
            "page": None,
            "snippet": "IBM 1911",
        }
        common = {"conversation_id": CID, "rating": "down", "comment": "", "trace_id": "t"}
        return httpx.Response(
            200,
            json={
                "messages": [
                    {
                        **common,
                        "message_id": "m1",
                        "question": "When?",
                        "answer": "1911",
                        "sources": [source],
                        "withdrawn": False,
                    },
                    {
                        **common,
                        "message_id": "m2",
                        "question": "Secret?",
                        "answer": "",
                        "sources": [],
                        "withdrawn": True,
                    },
                ]
            },
        )

    out = tmp_path / "eval.jsonl"
    result = invoke(handler, "conversations", "export", "--output", str(out))
    assert result.exit_code == 0, result.output
    assert "rating=down" in asked[0]
    cases = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(c["question"], c["answer"], c["sources"][0]["snippet"]) for c in cases] == [("When?", "1911", "IBM 1911")]
    assert "1 withdrawn" in result.output

"""Bad input to the HTTP API gets a 4xx that says what is wrong, never a 5xx (the app over a fake mesh)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from fastapi.testclient import TestClient
from grpc import aio

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh.common.v1 import common_pb2
from ragmesh.parser.v1 import parser_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_cli.tokens import mint
from ragmesh_gateway.app import create_app
from ragmesh_gateway.config import Settings
from ragmesh_gateway.models import ChatResponse, DocumentList, ErrorResponse, SearchResponse
from ragmesh_gateway.validation import strict_json, text_problem

SECRET = "test-secret-which-is-long-enough-for-hs256"
DOC_ID = "7b0e3f5e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
LEAKY = "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.1.2.3:50053: Connection refused"


def rpc_error(code: grpc.StatusCode, details: str) -> aio.AioRpcError:
    return aio.AioRpcError(code, aio.Metadata(), aio.Metadata(), details=details)


class Stub:
    """Answers each named method with a fixed reply (or raises it, for an exception)."""

    def __init__(self, **replies: Any) -> None:
        self.replies = replies

    def __getattr__(self, name: str) -> Any:
        reply = self.replies[name]

        def call(request: Any, **kwargs: Any) -> Any:
            if name == "Answer":
                return StreamCall(reply)
            return self._unary(reply)

        return call

    @staticmethod
    async def _unary(reply: Any) -> Any:
        if isinstance(reply, Exception):
            raise reply
        return reply


class StreamCall:
    """A server-streaming call as grpc.aio returns it: the answerer's admission header, then the events."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply

    async def initial_metadata(self) -> aio.Metadata:
        return aio.Metadata() if isinstance(self.reply, Exception) else aio.Metadata(("x-rag-admission", "started"))

    def cancel(self) -> bool:
        return False

    async def __aiter__(self) -> Any:
        if isinstance(self.reply, Exception):
            raise self.reply
        for item in self.reply:
            yield item


def document() -> common_pb2.Document:
    return common_pb2.Document(
        document_id=DOC_ID,
        title="T",
        filename="t.md",
        mime_type="text/markdown",
        owner_user="alice",
        owner_department="eng",
        acl=common_pb2.Acl(departments=["eng"]),
        status=common_pb2.DOCUMENT_STATUS_READY,
        chunk_count=1,
        size_bytes=10,
        created_at=datetime(2025, 1, 1, tzinfo=UTC),
        updated_at=datetime(2025, 1, 1, tzinfo=UTC),
    )


class FakeMesh:
    def __init__(
        self, *, retriever_error: aio.AioRpcError | None = None, guardrail_error: aio.AioRpcError | None = None
    ) -> None:
        chunk = common_pb2.ScoredChunk(
            chunk=common_pb2.Chunk(chunk_id="c1", document_id=DOC_ID, text="IBM was founded in 1911.", title="T"),
            score=0.8,
            hybrid_score=0.8,
            vector_score=0.8,
            lexical_score=1.0,
        )
        search = retriever_error or retriever_pb2.SearchResponse(results=[chunk], accessible_documents=1)
        self.retriever = Stub(
            Search=search,
            GetDocument=retriever_error or document(),
            UpdateDocumentStatus=document(),
            CreateOrGetDocument=retriever_error or retriever_pb2.CreateOrGetDocumentResponse(document=document()),
            DeleteDocument=retriever_error or retriever_pb2.DeleteDocumentResponse(deleted=True),
            ListDocuments=retriever_error or retriever_pb2.ListDocumentsResponse(documents=[document()], total=1),
        )
        self.answerer = Stub(
            CheckInput=guardrail_error or answerer_pb2.CheckInputResponse(allowed=True),
            Answer=[
                answerer_pb2.AnswerEvent(token="IBM was founded in 1911."),
                answerer_pb2.AnswerEvent(
                    final=answerer_pb2.AnswerFinal(
                        answer="IBM was founded in 1911.", model="m", grounding_score=1.0, grounded=True
                    )
                ),
            ],
        )
        self.parser = Stub(ListFormats=parser_pb2.ListFormatsResponse(extensions=[".md", ".pdf"]))
        self.reranker = Stub(Rerank=rpc_error(grpc.StatusCode.FAILED_PRECONDITION, "no reranker model configured"))
        self.graph = Stub(
            GetContext=rpc_error(grpc.StatusCode.UNAVAILABLE, LEAKY),
            RankChunks=rpc_error(grpc.StatusCode.UNAVAILABLE, LEAKY),
            DeleteDocument=rpc_error(grpc.StatusCode.UNAVAILABLE, LEAKY),
        )

    async def health(self) -> dict[str, str]:
        return {"retriever": "SERVING"}

    async def close(self) -> None:
        pass


def settings(tmp_path: Path) -> Settings:
    return Settings(
        host="127.0.0.1",
        port=0,
        parser_addr="x:1",
        embedder_addr="x:1",
        retriever_addr="x:1",
        reranker_addr="x:1",
        graph_addr="x:1",
        answerer_addr="x:1",
        redis_url="redis://127.0.0.1:1/0",
        cache_enabled=False,  # a fake mesh without an embedder; the cache: test_gateway_cache.py
        linked_documents=0,  # fake retrievers without FetchSection; the link step: test_gateway_link.py
        traces_dsn=None,
        upload_dir=tmp_path / "uploads",
        jwt_secret=SECRET,
        jwt_issuer=None,
        jwt_audience=None,
        jwks_url=None,
        rate_limit_per_minute=0,
        max_json_bytes=64 * 1024,
        max_header_bytes=8 * 1024,
    )


def make_client(tmp_path: Path, mesh: FakeMesh, roles: list[str] | None = None) -> Iterator[TestClient]:
    app = create_app(settings(tmp_path), mesh=mesh)
    token = mint(SECRET, "alice", "eng", roles or ["employee"])
    with TestClient(app, raise_server_exceptions=False, headers={"Authorization": f"Bearer {token}"}) as client:
        yield client


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    yield from make_client(tmp_path, FakeMesh())


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[TestClient]:
    yield from make_client(tmp_path, FakeMesh(), ["admin"])


def refused(reply: Any, status: int | tuple[int, ...], *words: str) -> dict[str, Any]:
    """The reply is the expected 4xx, in the error model, and its message says `words`."""
    statuses = status if isinstance(status, tuple) else (status,)
    assert reply.status_code in statuses, (reply.status_code, reply.text)
    body = reply.json()
    ErrorResponse.model_validate(body)
    for word in words:
        assert word in reply.text, (word, reply.text)
    return body


def post_raw(client: TestClient, path: str, raw: bytes | str) -> Any:
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    return client.post(path, content=data, headers={"Content-Type": "application/json"})


# ---------- text ----------
@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("when\x00was IBM founded", ("NUL", "question")),
        ("when was IBM founded\x1b[2J", ("U+001B",)),
        ("when was IBM founded\x7f", ("U+007F",)),
        ("when was IBM founded\x85", ("U+0085",)),
    ],
)
def test_control_characters_in_a_question_are_422(client: TestClient, value: str, words: tuple[str, ...]) -> None:
    body = refused(client.post("/api/v1/chat", json={"question": value}), 422, *words)
    assert body["detail"][0]["loc"] == ["body", "question"]
    assert value not in json.dumps(body)  # the input is not echoed


@pytest.mark.parametrize(
    "raw",
    [
        '{"question": "IBM \\ud800 founded"}',  # an escaped lone high surrogate
        '{"question": "IBM \\udc00 founded"}',  # an escaped lone low surrogate
        '{"question": "ok", "extra": {"\\udbff": 1}}',  # in a key the model ignores
        b'{"question": "IBM \xed\xa0\x80 founded"}',  # a surrogate encoded as UTF-8 bytes
        b'{"question": "IBM \xff founded"}',  # not UTF-8 at all
    ],
)
def test_lone_surrogates_and_bad_utf8_are_422(client: TestClient, raw: bytes | str) -> None:
    refused(post_raw(client, "/api/v1/chat", raw), 422)
    refused(
        post_raw(
            client,
            "/api/v1/search",
            raw.replace("question", "query") if isinstance(raw, str) else raw.replace(b"question", b"query"),
        ),
        422,
    )


def test_tabs_newlines_and_surrogate_pairs_are_text(client: TestClient) -> None:
    reply = post_raw(client, "/api/v1/chat", '{"question": "When was\\tIBM\\nfounded \\ud83d\\ude00?\\r"}')
    assert reply.status_code == 200, reply.text
    ChatResponse.model_validate(reply.json())


@pytest.mark.parametrize(
    "raw",
    [
        '{"question": "IBM", "alpha": NaN}',
        '{"question": "IBM", "alpha": Infinity}',
        '{"question": "IBM", "alpha": -Infinity}',
        '{"question": NaN}',
        '{"question": "IBM", "context": {"coverage_weight": Infinity}}',
    ],
)
def test_nan_and_infinity_are_422(client: TestClient, raw: str) -> None:
    refused(post_raw(client, "/api/v1/chat", raw), 422, "not a JSON number")


def test_search_query_is_checked_like_a_question(client: TestClient) -> None:
    refused(client.post("/api/v1/search", json={"query": "a\x00b"}), 422, "NUL")
    refused(post_raw(client, "/api/v1/search", '{"query": "x", "feedback_weight": NaN}'), 422)
    refused(client.post("/api/v1/search", json={"query": "x", "top_k": 10**30}), 422)
    reply = client.post("/api/v1/search", json={"query": "When was IBM founded?"})
    assert reply.status_code == 200, reply.text
    SearchResponse.model_validate(reply.json())


def test_history_is_checked(client: TestClient) -> None:
    refused(
        client.post(
            "/api/v1/chat", json={"question": "and then?", "history": [{"role": "user", "content": "IBM\x00"}]}
        ),
        422,
        "NUL",
    )
    turns = [{"role": "user", "content": "hi"}] * 21
    refused(client.post("/api/v1/chat", json={"question": "and then?", "history": turns}), 422, "history")
    refused(client.post("/api/v1/chat", json={"question": "q", "history": [{"role": "system", "content": "x"}]}), 422)


# ---------- sizes and counts ----------
def test_list_limits(client: TestClient) -> None:
    ids = ["7b0e3f5e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"] * 1001
    refused(client.post("/api/v1/chat", json={"question": "q", "document_ids": ids}), 422, "document_ids")
    refused(client.post("/api/v1/search", json={"query": "q", "document_ids": ids}), 422, "document_ids")
    refused(client.post("/api/v1/chat", json={"question": "q", "levels": ["paragraph"] * 4}), 422, "levels")
    refused(client.post("/api/v1/chat", json={"question": "q" * 4001}), 422, "question")
    refused(client.post("/api/v1/chat", json={"question": "q", "document_ids": ["not-a-uuid"]}), 422)


def test_a_body_over_the_json_limit_is_413(client: TestClient) -> None:
    body = json.dumps({"question": "q", "history": [{"role": "user", "content": "x" * 8000}] * 10})
    refused(post_raw(client, "/api/v1/chat", body), 413)


def test_headers_over_the_limit_are_431(client: TestClient) -> None:
    refused(client.get("/api/v1/documents", headers={"X-Padding": "x" * 9000}), 431, "headers")


@pytest.mark.parametrize(
    "query",
    [
        "offset=3000000000",
        "offset=-1",
        "limit=0",
        "limit=1001",
        "limit=abc",
        "offset=1e3",
        "limit=99999999999999999999999",
    ],
)
def test_document_list_integers_are_bounded(client: TestClient, query: str) -> None:
    refused(client.get(f"/api/v1/documents?{query}"), 422)


def test_document_list_in_bounds(client: TestClient) -> None:
    reply = client.get("/api/v1/documents?offset=2147483647&limit=1000")
    assert reply.status_code == 200, reply.text
    DocumentList.model_validate(reply.json())


# ---------- uploads ----------
def upload(client: TestClient, filename: str = "notes.md", **form: str) -> Any:
    return client.post("/api/v1/documents", files={"file": (filename, b"# Notes\n\nhello", "text/markdown")}, data=form)


@pytest.mark.parametrize(
    ("form", "status", "words"),
    [
        ({"title": "x" * 501}, 422, ("title",)),
        ({"title": "Q3\x00report"}, 422, ("NUL", "title")),
        ({"acl": '{"departments": ["eng\\u0000"]}'}, 400, ("departments.0",)),
        ({"acl": '{"departments": ["eng\\nhr"]}'}, 400, ("departments.0",)),
        ({"acl": json.dumps({"users": ["u" * 129]})}, 400, ("users.0",)),
        ({"acl": json.dumps({"roles": [f"r{i}" for i in range(257)]})}, 400, ("roles",)),
        ({"acl": '{"department": ["eng"]}'}, 400, ("department",)),  # misspelt key
        ({"acl": '{"public": NaN}'}, 400, ("acl",)),
        ({"acl": '{"users": ["\\ud800"]}'}, 400, ("acl",)),
        ({"acl": "[1, 2"}, 400, ("acl",)),
        ({"acl": "x" * 65537}, 422, ("acl",)),
        ({"acl": "{\x01}"}, 422, ("acl",)),
    ],
)
def test_bad_upload_fields_are_4xx(
    client: TestClient, form: dict[str, str], status: int, words: tuple[str, ...]
) -> None:
    refused(upload(client, **form), status, *words)


@pytest.mark.parametrize(
    ("filename", "content", "words"),
    [
        ("notes.md", b"\x89PNG\r\n\x1a\n" + bytes(32), ("notes.md", "PNG image")),
        ("notes.md", b"ab\x00cd" * 20, ("binary", "NUL")),
        ("report.pdf", b"hello", ("not a PDF", "%PDF")),
        ("report.pdf", b"PK\x03\x04" + bytes(26), ("not a PDF",)),
    ],
)  # the fake mesh's parser accepts .md and .pdf
def test_content_that_contradicts_the_extension_is_415(
    client: TestClient, filename: str, content: bytes, words: tuple[str, ...]
) -> None:
    reply = client.post("/api/v1/documents", files={"file": (filename, content, "application/octet-stream")})
    refused(reply, 415, *words)


@pytest.mark.parametrize("filename", [b"no\x00tes.md", b"notes\x1b.md", b"notes\x7f.md", b"n" * 1025 + b".md"])
def test_bad_file_names_are_400(client: TestClient, filename: bytes) -> None:
    # written by hand: httpx, like browsers, percent-encodes control characters in a file name
    body = (
        b'--b\r\nContent-Disposition: form-data; name="file"; filename="' + filename + b'"\r\n'
        b"Content-Type: text/markdown\r\n\r\n# Notes\r\n--b--\r\n"
    )
    reply = client.post("/api/v1/documents", content=body, headers={"Content-Type": "multipart/form-data; boundary=b"})
    refused(reply, 400, "file name")


# ---------- traces ----------
@pytest.mark.parametrize(
    "query", ["name=a%00b", "name=a%1Bb", "name=" + "x" * 101, "limit=0", "hours=100000", "limit=1e99"]
)
def test_trace_filters_are_checked(admin: TestClient, query: str) -> None:
    refused(admin.get(f"/api/v1/traces?{query}"), 422)


def test_trace_ids_are_checked(admin: TestClient) -> None:
    refused(admin.get("/api/v1/traces/not-hex"), 422, "trace_id")
    refused(admin.get("/api/v1/traces/" + "A" * 32), 422, "trace_id")
    # the filters are fine, trace storage is not configured here: a 503 that says so
    refused(admin.get("/api/v1/traces?name=chat"), 503, "GATEWAY_TRACES_DSN")


# ---------- 503s ----------
def test_503_names_the_step_and_cause_without_addresses(tmp_path: Path) -> None:
    mesh = FakeMesh(
        retriever_error=rpc_error(grpc.StatusCode.UNAVAILABLE, LEAKY),
        guardrail_error=rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded at 10.1.2.3:50056"),
    )
    for client in make_client(tmp_path, mesh):
        listed = refused(client.get("/api/v1/documents"), 503, "catalogue", "unreachable")
        chat = refused(client.post("/api/v1/chat", json={"question": "When was IBM founded?"}), 503)
        assert chat["detail"]["step"] == "guardrail" and "deadline" in chat["detail"]["message"]
        search = refused(client.post("/api/v1/search", json={"query": "IBM"}), 503)
        assert search["detail"]["step"] == "retrieve"
        for body in (listed, chat, search):
            assert "10.1.2.3" not in json.dumps(body) and "5005" not in json.dumps(body)


# ---------- the spec ----------
def test_every_operation_declares_typed_success_and_errors(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert "ErrorResponse" in spec["components"]["schemas"]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            success = [code for code in responses if code.startswith("2")]
            assert success, (method, path)
            for code in success:
                content = responses[code].get("content", {})
                assert any(c.get("schema") for c in content.values()), (method, path, code)
            if path.startswith("/api/"):
                assert {"401", "422"} <= set(responses), (method, path, sorted(responses))
            for code, response in responses.items():
                if code.startswith(("4", "5")) and path != "/readyz":
                    schema = response["content"]["application/json"]["schema"]
                    model = "OpenAIErrorResponse" if path.startswith("/v1/") else "ErrorResponse"  # OpenAI's shape
                    assert schema == {"$ref": f"#/components/schemas/{model}"}, (method, path, code)
    chat = spec["paths"]["/api/v1/chat"]["post"]["responses"]["200"]["content"]
    assert chat["application/json"]["schema"] == {"$ref": "#/components/schemas/ChatResponse"}
    assert "text/event-stream" in chat


def test_strict_json_and_text_problem() -> None:
    assert strict_json(b'{"a": [1, 2.5, "\\ud83d\\ude00"]}') == {"a": [1, 2.5, "\U0001f600"]}
    for bad in (b"NaN", b'{"a": -Infinity}', b'["\\ud800"]', b'"\xed\xb0\x80"'):
        with pytest.raises(json.JSONDecodeError):
            strict_json(bad)
    assert text_problem("tab\tnewline\ncr\r") is None
    assert "NUL" in (text_problem("a\x00") or "")
    assert "surrogate" in (text_problem("a\udc80") or "")

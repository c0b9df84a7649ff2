"""Hostile uploads cannot stall or exhaust the gateway (#30): ZIP bombs and containers of 50,000 entries are refused
with a 415 that says why, from their declared sizes, without inflating them (memory measured with tracemalloc); the
audit's 465-byte .docx with a 40,000-character attribute is checked in time linear in its size; and the check
runs off the event loop, so an ordinary request is served while a large upload is being checked."""

from __future__ import annotations

import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from ragmesh.parser.v1 import parser_pb2
from ragmesh_cli.tokens import mint
from ragmesh_common import formats
from ragmesh_dev import hostile
from ragmesh_gateway.app import create_app

sys.path.insert(0, str(Path(__file__).parent))  # the bad-input tests' fake mesh (tests run in importlib mode)
from test_gateway_bad_input import SECRET, FakeMesh, Stub, settings

TOKEN = mint(SECRET, "alice", "eng", ["employee"])
MIME = {
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}


def mesh() -> FakeMesh:
    """The bad-input tests' fake mesh, whose parser lists every format the registry has."""
    fake = FakeMesh()
    fake.parser = Stub(ListFormats=parser_pb2.ListFormatsResponse(extensions=formats.accepted_extensions()))
    return fake


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(settings(tmp_path), mesh=mesh())
    with TestClient(app, raise_server_exceptions=False, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield c


def upload(client: TestClient, case: hostile.HostileFile) -> httpx.Response:
    mime = MIME.get(case.filename.rsplit(".", 1)[-1], "application/octet-stream")
    return client.post("/api/v1/documents", files={"file": (case.filename, case.content, mime)})


ZIP_ATTACKS = hostile.zip_files()


def peak_memory(client: TestClient, case: hostile.HostileFile) -> tuple[httpx.Response, int]:
    tracemalloc.start()
    try:
        reply = upload(client, case)
        return reply, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("case", ZIP_ATTACKS, ids=[c.name for c in ZIP_ATTACKS])
def test_zip_bombs_are_refused_from_their_declared_sizes(client: TestClient, case: hostile.HostileFile) -> None:
    reply, peak = peak_memory(client, case)
    assert reply.status_code == 415, reply.text
    detail = reply.json()["detail"]
    assert case.filename in detail and ("bomb" in detail or "entries" in detail), detail
    # nothing was inflated: the peak is what any upload of that size costs (a text file of the same length), not
    # the hundreds of MiB the container declares
    text = hostile.HostileFile("text", "same.md", b"# T\n\n" + b"a" * (len(case.content) - 5), "")
    _, text_peak = peak_memory(client, text)
    assert peak < 2 * text_peak + 4 * 1024 * 1024, (peak, text_peak, case.description)


def test_the_audits_attribute_docx_costs_what_its_size_does() -> None:
    """The 40,000-character attribute took the backtracking regex 35 s. Its check now costs within a small factor
    of the same container with an ordinary tag (a ratio of CPU times, not a time limit)."""
    attack = hostile.huge_attribute_docx(40_000)
    benign = hostile.huge_attribute_docx(0)  # the same container, an ordinary tag

    def cost(content: bytes) -> float:
        best = float("inf")
        for _ in range(5):
            started = time.thread_time()
            formats.check_content("a.docx", content)
            best = min(best, time.thread_time() - started)
        return best

    assert formats.check_content("a.docx", attack.content) == "docx"
    assert cost(attack.content) <= 20 * cost(benign.content)


def test_an_ordinary_request_is_served_while_an_upload_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The content check runs in a worker thread: with the check held until an ordinary request has been answered,
    the upload still completes (on the event loop the two would deadlock and the upload time out)."""
    from ragmesh_gateway import documents

    answered = threading.Event()
    original = documents.check_upload_content

    def held_check(filename: str, content: bytes, mime_type: str = "") -> None:
        assert answered.wait(60), "the ordinary request was not answered while the upload was checked"
        original(filename, content, mime_type)

    monkeypatch.setattr(documents, "check_upload_content", held_check)
    app = create_app(settings(tmp_path), mesh=mesh())
    case = hostile.huge_attribute_docx()
    replies: dict[str, httpx.Response] = {}
    with TestClient(app, raise_server_exceptions=False, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        uploading = threading.Thread(target=lambda: replies.setdefault("upload", upload(client, case)))
        uploading.start()
        replies["ordinary"] = client.get("/api/v1/formats")  # answered while the check is held
        answered.set()
        uploading.join(120)
    assert replies["ordinary"].status_code == 200
    assert "upload" in replies and replies["upload"].status_code != 415, replies.get("upload")

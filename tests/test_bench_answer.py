"""bench/answer.py: a question whose document never became ready is reported as not indexed, never as a refusal
or a retrieval miss, so an invalid run (documents that failed ingestion) cannot pass for a low answer rate."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # bench_modules (tests run in importlib mode)
from bench_modules import load_bench

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def _load() -> ModuleType:
    return load_bench("answer")


bench = _load()


def _result(outcome: str, **final: Any) -> dict[str, Any]:
    return {
        "outcome": outcome,
        "final": {"outcome": outcome, "sources": [], **final},
        "ttft_s": None,
        "ttfs_s": None,
        "total_s": 1.0,
        "error": "",
    }


def _question(qid: str, document: str) -> Any:
    return bench.Question("squad", qid, "When was IBM founded?", ["1911"], ["p1"], [document])


def test_a_question_whose_document_failed_ingestion_is_not_indexed_not_refused() -> None:
    corpus = bench.Corpus()
    not_ready = frozenset({"squad:Lost"})
    rows = [
        bench.score(_question("q1", "squad:Lost"), _result("no_sources"), {}, corpus, not_ready),
        bench.score(_question("q2", "squad:IBM"), _result("no_sources"), {}, corpus, not_ready),
        bench.score(_question("q3", "squad:IBM"), _result("answer", withheld=True), {}, corpus, not_ready),
        bench.score(
            _question("q4", "squad:IBM"),
            _result("answer", answer="It was founded in 1911.", short_answer="1911", grounded=True),
            {},
            corpus,
            not_ready,
        ),
    ]
    assert [r["indexed"] for r in rows] == [False, True, True, True]
    # q3 was withheld without its gold passage among the sources: a retrieval miss (q4 is right)
    assert bench.failure_stages(rows) == {"grade": 1, "not_indexed": 1, "retrieval": 1}
    summary = bench.summarise(rows, offtopic=False)
    assert summary["not_indexed"] == 1
    assert (summary["refused"], summary["refused_no_sources"], summary["refused_withheld"]) == (2, 1, 1)
    assert summary["answered_rate"] == 0.25  # over all four
    assert summary["answered_rate_indexed"] == 0.3333  # over the three that could be answered


def test_the_table_of_an_invalid_run_says_so() -> None:
    rows = [
        bench.score(_question("q1", "squad:Lost"), _result("no_sources"), {}, bench.Corpus(), frozenset({"squad:Lost"}))
    ]
    report = {
        "squad": bench.summarise(rows, offtopic=False),
        "meta": {
            "squad": 1,
            "squad_articles": 1,
            "hotpotqa": 0,
            "hotpotqa_passages": 0,
            "offtopic": 0,
            "neartopic": 0,
            "wall_seconds": 60.0,
            "modes": ["auto"],
            "ingestion": {"documents": 1, "failed": 1, "failures": {"squad:Lost": "failed: embed failed"}},
        },
    }
    table = bench.markdown(report)
    assert "INVALID RUN: 1 of 1 documents never became ready; 1 questions need one" in table
    assert "| not indexed (questions) | 1 |" in table
    assert "not_indexed 1" in table


@pytest.mark.skipif(not (DATA / "squad_v1.1_dev").is_dir(), reason="benchmark data not present")
def test_every_question_names_the_uploads_it_needs() -> None:
    squad, squad_corpus, near = bench.squad_questions(DATA, 6, bench.SEED, 2)
    keys = {u.key for u in squad_corpus.uploads}
    assert squad and near
    assert all(q.documents and set(q.documents) <= keys for q in squad + near)
    hotpot, hotpot_corpus = bench.hotpot_questions(DATA, 3)
    keys = {u.key for u in hotpot_corpus.uploads}
    assert all(len(q.documents) == 2 and set(q.documents) <= keys for q in hotpot)  # the two supporting passages


async def test_a_gateway_busy_while_polling_is_asked_again_not_counted_as_a_failed_document(tmp_path: Path) -> None:
    """A loaded gateway answers a document's GET with 503 when its catalogue call misses the deadline: the
    document is still ingesting (or ready), so the bench asks again instead of recording it as not indexed."""
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    polls: list[int] = []

    async def upload(request: web.Request) -> web.Response:
        return web.json_response({"document_id": "d1"}, status=202)

    async def status(request: web.Request) -> web.Response:
        polls.append(1)
        if len(polls) == 1:
            return web.json_response({"detail": "the catalogue did not answer in time"}, status=503)
        return web.json_response({"status": "ready"})

    app = web.Application()
    app.router.add_post("/api/v1/documents", upload)
    app.router.add_get("/api/v1/documents/{id}", status)
    async with TestServer(app) as server:
        api = bench.Api(str(server.make_url("")))
        await api.open()
        try:
            item = bench.Upload("squad:IBM", "IBM.md", "IBM", "# IBM\n\nFounded in 1911.\n", bench.SQUAD_DEPARTMENT)
            tokens = {"squad": "t", "hotpotqa": "t"}
            result = await bench.ingest(api, tokens, [item], tmp_path / bench.MANIFEST)
        finally:
            await api.close()
    assert (result["failed"], result["not_ready"]) == (0, [])
    assert len(polls) == 2


async def test_a_reused_data_folder_holds_exactly_this_runs_corpus(tmp_path: Path) -> None:
    """A second run with the same --data-dir reuses an upload whose content it would send again, uploads an
    article whose content changed (another paragraph held out) as a new document, and deletes what the earlier
    run uploaded and this one does not, so no held-out paragraph stays in the index."""
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    uploaded: list[str] = []
    deleted: list[str] = []

    async def upload(request: web.Request) -> web.Response:
        form = await request.post()
        uploaded.append(str(form["title"]))
        return web.json_response({"document_id": f"id-{len(uploaded)}"}, status=202)

    async def status(request: web.Request) -> web.Response:
        return web.json_response({"status": "ready"})

    async def delete(request: web.Request) -> web.Response:
        deleted.append(request.match_info["id"])
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/api/v1/documents", upload)
    app.router.add_get("/api/v1/documents/{id}", status)
    app.router.add_delete("/api/v1/documents/{id}", delete)
    tokens = {"squad": "t", "hotpotqa": "t"}
    ibm = bench.Upload("squad:IBM", "IBM.md", "IBM", "# IBM\n\nFounded in 1911.\n\nHeld out.\n", bench.SQUAD_DEPARTMENT)
    acme = bench.Upload("squad:Acme", "Acme.md", "Acme", "# Acme\n\nAnvils.\n", bench.SQUAD_DEPARTMENT)
    async with TestServer(app) as server:
        api = bench.Api(str(server.make_url("")))
        await api.open()
        try:
            first = await bench.ingest(api, tokens, [ibm, acme], tmp_path / bench.MANIFEST)
            changed = bench.Upload("squad:IBM", "IBM.md", "IBM", "# IBM\n\nFounded in 1911.\n", bench.SQUAD_DEPARTMENT)
            second = await bench.ingest(api, tokens, [changed, acme], tmp_path / bench.MANIFEST)
        finally:
            await api.close()
    assert (first["uploaded"], first["reused"]) == (2, 0)
    assert (second["uploaded"], second["reused"]) == (1, 1) and uploaded == ["IBM", "Acme", "IBM"]
    assert deleted == ["id-1"]  # the first run's IBM, with the paragraph this run holds out


async def test_the_run_clears_the_semantic_cache_and_refuses_to_go_on_when_it_cannot(tmp_path: Path) -> None:
    """A kept data folder's Redis holds the answers an earlier run's code made: served from the cache, they would
    count as this run's. The bench clears it first; a refusal stops the run (a cache that is off is fine)."""
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    replies = [(200, {"cleared": 7}), (409, {"detail": "the semantic cache is off"}), (403, {"detail": "admins"})]
    seen: list[str] = []

    async def clear(request: web.Request) -> web.Response:
        seen.append(request.headers["Authorization"])
        status, body = replies[len(seen) - 1]
        return web.json_response(body, status=status)

    app = web.Application()
    app.router.add_delete("/api/v1/admin/cache", clear)
    async with TestServer(app) as server:
        api = bench.Api(str(server.make_url("")))
        await api.open()
        try:
            assert await api.clear_cache("admin-token") == 7
            assert await api.clear_cache("admin-token") == 0
            with pytest.raises(RuntimeError, match="not cleared: http 403"):
                await api.clear_cache("not-an-admin")
        finally:
            await api.close()
    assert seen[0] == "Bearer admin-token"

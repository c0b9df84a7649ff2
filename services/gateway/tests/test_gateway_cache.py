"""The semantic cache: its decision logic over a real (embedded) Redis with fake access checks, and the chat API
over a fake mesh: a hit says so with the first trace, a user who cannot read a source is never served, a
changed source is never served, `cache: false` bypasses it, and only verified answers are stored."""

from __future__ import annotations

import asyncio
import re
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import jwt
import numpy as np
import pytest
import pytest_asyncio
from fastapi.testclient import TestClient
from redis.asyncio import Redis

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh.embedder.v1 import embedder_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_cli.tokens import mint
from ragmesh_common.context import IDENTITY_KEY, UserContext
from ragmesh_dev.engines.redis import EmbeddedRedis
from ragmesh_dev.ports import free_port
from ragmesh_gateway.app import create_app
from ragmesh_gateway.cache import SemanticCache, option_key

sys.path.insert(0, str(Path(__file__).parent))  # the bad-input tests' fakes (tests run in importlib mode)
from openapi_contract import CHAT, problems, response_schema, stream_problems
from test_gateway_bad_input import DOC_ID, SECRET, FakeMesh, Stub, settings
from test_gateway_contract import VERIFIED, WITHHELD, sse

DIM = 8
ALICE = UserContext(user_id="alice", department="eng", roles=["employee"])
BOB = UserContext(user_id="bob", department="sales", roles=["employee"])


def vec(seed: int, noise: float = 0.0, base: int | None = None) -> list[float]:
    """A unit vector; `noise` moves it a little away from the vector of `base` (a paraphrase)."""
    rng = np.random.default_rng(seed if base is None else base)
    v = rng.normal(size=DIM)
    if noise:
        v = v + noise * np.random.default_rng(seed + 1000).normal(size=DIM)
    return [float(x) for x in v / np.linalg.norm(v)]


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


class Access:
    """The catalogue as the fake sees it: per document its stamp and the users who may read it."""

    def __init__(self) -> None:
        self.docs: dict[str, tuple[str, set[str]]] = {}
        self.calls = 0

    async def stamps(self, user: UserContext, ids: list[str]) -> tuple[dict[str, str], int]:
        self.calls += 1
        readable = {d: stamp for d, (stamp, readers) in self.docs.items() if user.user_id in readers}
        return {d: readable[d] for d in ids if d in readable}, len(readable)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), free_port())
    server.start()
    yield server.url
    server.stop()


@pytest_asyncio.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    await client.flushdb()
    yield client
    await client.aclose()


def make_cache(redis: Redis, access: Access, **kwargs: Any) -> SemanticCache:
    options: dict[str, Any] = {"threshold": 0.95, "ttl_seconds": 3600, "max_entries": 100, "bucket_entries": 50}
    return SemanticCache(redis, access.stamps, **{**options, **kwargs})


async def put(cache: SemanticCache, bucket: str, vector: list[float], docs: list[str], answer: str = "A") -> str:
    stamps = await cache.pin(ALICE, docs)
    assert stamps is not None
    return await cache.store(bucket, vector, question="q", payload={"answer": answer}, trace_id="t" * 32, stamps=stamps)


@pytest.mark.asyncio
async def test_a_paraphrase_hits_and_a_different_question_misses(redis: Redis) -> None:
    access = Access()
    access.docs = {"d1": ("s1", {"alice", "bob"})}
    cache = make_cache(redis, access)
    await put(cache, "b", vec(1), ["d1"])
    close, far = vec(2, noise=0.1, base=1), vec(3)
    assert cosine(close, vec(1)) >= 0.95 > cosine(far, vec(1))
    found = await cache.lookup(BOB, "b", close)
    assert found.hit is not None and found.hit.payload == {"answer": "A"} and found.hit.trace_id == "t" * 32
    assert found.hit.accessible_documents == 1
    assert (await cache.lookup(BOB, "b", far)).hit is None
    assert (await cache.lookup(BOB, "other options", vec(1))).hit is None  # another bucket: other options


@pytest.mark.asyncio
async def test_never_served_to_a_user_who_cannot_read_every_source(redis: Redis) -> None:
    access = Access()
    access.docs = {"d1": ("s1", {"alice", "bob"}), "d2": ("s2", {"alice"})}
    cache = make_cache(redis, access)
    await put(cache, "b", vec(1), ["d1", "d2"])  # d2 is a source not cited: it counts all the same
    found = await cache.lookup(BOB, "b", vec(1))
    assert found.hit is None and found.refused == 1
    assert (await cache.lookup(ALICE, "b", vec(1))).hit is not None  # the entry stays for those who may
    access.docs["d2"] = ("s2", {"alice", "bob"})  # bob is granted d2 with the same stamp: now shared
    assert (await cache.lookup(BOB, "b", vec(1))).hit is not None


@pytest.mark.asyncio
async def test_a_changed_or_deleted_source_is_never_served(redis: Redis) -> None:
    access = Access()
    access.docs = {"d1": ("s1", {"alice"})}
    cache = make_cache(redis, access)
    await put(cache, "b", vec(1), ["d1"])
    access.docs["d1"] = ("s1-acl-changed", {"alice"})  # same readers, new stamp (ACL or version changed)
    assert (await cache.lookup(ALICE, "b", vec(1))).hit is None
    access.docs["d1"] = ("s1", {"alice"})  # even back to the old stamp: the stale entry was dropped
    assert (await cache.lookup(ALICE, "b", vec(1))).candidates == 0
    await put(cache, "b", vec(1), ["d1"])
    del access.docs["d1"]  # deleted
    assert (await cache.lookup(ALICE, "b", vec(1))).hit is None


@pytest.mark.asyncio
async def test_invalidation_drops_the_entries_of_a_document(redis: Redis) -> None:
    access = Access()
    access.docs = {"d1": ("s1", {"alice"}), "d2": ("s2", {"alice"})}
    cache = make_cache(redis, access)
    await put(cache, "b", vec(1), ["d1"])
    await put(cache, "b", vec(5), ["d2"])
    assert await cache.invalidate("d1") == 1
    assert (await cache.lookup(ALICE, "b", vec(1))).hit is None
    assert (await cache.lookup(ALICE, "b", vec(5))).hit is not None
    assert (await cache.stats())["invalidated"] == 1


@pytest.mark.asyncio
async def test_a_clear_drops_every_entry_and_keeps_the_counters(redis: Redis) -> None:
    access = Access()
    access.docs = {"d1": ("s1", {"alice"}), "d2": ("s2", {"alice"})}
    cache = make_cache(redis, access)
    await redis.set("unrelated:key", "kept")  # another user of the same Redis (the broker, rate limits)
    await put(cache, "b", vec(1), ["d1"])
    await put(cache, "other", vec(5), ["d1", "d2"])
    assert (await cache.lookup(ALICE, "b", vec(1))).hit is not None
    assert await cache.clear() == 2
    assert (await cache.lookup(ALICE, "b", vec(1))).candidates == 0
    assert (await cache.lookup(ALICE, "other", vec(5))).candidates == 0
    assert await redis.keys("ragmesh:cache:[evod]:*") == [] and await redis.get("unrelated:key") == b"kept"
    stats = await cache.stats()
    assert stats["entries"] == 0 and stats["cleared"] == 2 and stats["stores"] == 2
    await put(cache, "b", vec(1), ["d1"])  # the cache fills again as before
    assert (await cache.lookup(ALICE, "b", vec(1))).hit is not None


@pytest.mark.asyncio
async def test_a_source_not_readable_at_store_time_is_not_cached(redis: Redis) -> None:
    access = Access()
    access.docs = {"d1": ("s1", {"bob"})}
    cache = make_cache(redis, access)
    assert await cache.pin(ALICE, ["d1"]) is None
    assert await cache.pin(ALICE, []) is None


@pytest.mark.asyncio
async def test_the_bucket_and_the_cache_are_bounded(redis: Redis) -> None:
    access = Access()
    access.docs = {"d1": ("s1", {"alice"})}
    cache = make_cache(redis, access, bucket_entries=3, max_entries=5)
    for seed in range(4):
        await put(cache, "b", vec(10 + seed), ["d1"], answer=str(seed))
    assert (await cache.lookup(ALICE, "b", vec(10))).hit is None  # the oldest went
    assert (await cache.lookup(ALICE, "b", vec(13))).candidates == 3
    for seed in range(3):
        await put(cache, "c", vec(20 + seed), ["d1"])
    assert (await cache.stats())["entries"] == 5


def test_the_key_covers_every_option() -> None:
    assert option_key({"top_k": 5, "document_ids": []}) == option_key({"document_ids": [], "top_k": 5})
    assert option_key({"top_k": 5, "document_ids": []}) != option_key({"top_k": 5, "document_ids": [DOC_ID]})


# ---------- the chat API over a fake mesh ----------
class CacheMesh(FakeMesh):
    """The bad-input fakes with an embedder (paraphrases embed alike) and the catalogue's stamps."""

    def __init__(self, final: answerer_pb2.AnswerFinal) -> None:
        super().__init__()
        self.readers = {"alice", "bob"}
        self.stamp = "v1"
        self.answers = 0
        self.embedder = Stub()
        self.embedder.Embed = self._embed  # type: ignore[method-assign]
        self.retriever.replies["GetDocumentStamps"] = None
        self.retriever.GetDocumentStamps = self._stamps  # type: ignore[method-assign]
        events = [answerer_pb2.AnswerEvent(token=final.answer), answerer_pb2.AnswerEvent(final=final)]
        self.answerer.replies["Answer"] = events
        inner = self.answerer

        outer = self

        class CountingAnswerer:
            def __getattr__(self, name: str) -> Any:
                if name == "Answer":
                    outer.answers += 1
                return getattr(inner, name)

        self.answerer = CountingAnswerer()  # type: ignore[assignment]

    async def _embed(self, request: embedder_pb2.EmbedRequest, **_: Any) -> embedder_pb2.EmbedResponse:
        text = request.texts[0].lower().rstrip("?").replace("in which year was", "when was")
        return embedder_pb2.EmbedResponse(vectors=[embedder_pb2.Vector(values=vec(hash(text) % 1000))])

    async def _stamps(self, request: Any, *, metadata: Any, **_: Any) -> retriever_pb2.GetDocumentStampsResponse:
        token = dict(metadata)[IDENTITY_KEY]  # the internal token the gateway signed for the asker
        user = jwt.decode(token, options={"verify_signature": False})["sub"]
        await asyncio.sleep(0)
        reply = retriever_pb2.GetDocumentStampsResponse(accessible_documents=1 if user in self.readers else 0)
        if user in self.readers and DOC_ID in request.document_ids:
            reply.documents.add(document_id=DOC_ID, version=1, stamp=self.stamp)
        return reply


def client_for(tmp_path: Path, mesh: CacheMesh, redis_url: str, user: str) -> Iterator[TestClient]:
    config = settings(tmp_path).model_copy(update={"cache_enabled": True, "redis_url": redis_url})
    app = create_app(config, mesh=mesh)
    token = mint(SECRET, user, "eng", ["admin"] if user == "admin" else ["employee"])
    with TestClient(app, raise_server_exceptions=False, headers={"Authorization": f"Bearer {token}"}) as client:
        yield client


@pytest.fixture
def flushed(redis_url: str) -> str:
    import redis as sync_redis

    sync_redis.Redis.from_url(redis_url).flushdb()
    return redis_url


def test_a_hit_through_the_api_says_so_and_matches_the_spec(tmp_path: Path, flushed: str) -> None:
    mesh = CacheMesh(VERIFIED)
    for alice in client_for(tmp_path, mesh, flushed, "alice"):
        spec = alice.get("/openapi.json").json()
        first = alice.post("/api/v1/chat", json={"question": "When was IBM founded?"}).json()
        assert first["cache_hit"] is False and first["cached_trace_id"] is None
        second = alice.post("/api/v1/chat", json={"question": "In which year was IBM founded?"}).json()
        assert second["cache_hit"] is True and second["cached_trace_id"] == first["trace_id"]
        assert second["answer"] == first["answer"]  # (no tracer here: the trace ids differ in the e2e test)
        assert second["sources"] == first["sources"] and mesh.answers == 1
        assert [p["stage"] for p in second["progress"]] == ["guardrail", "understand", "cache"]
        assert problems(spec, response_schema(spec, *CHAT), second) == []
        events = sse(alice, {"question": "when was ibm founded"})
        final = next(data for name, data in events if name == "final")
        assert final["cache_hit"] is True and final["cached_trace_id"] == first["trace_id"]
        assert stream_problems(spec, events) == [] and mesh.answers == 1
        bypass = alice.post("/api/v1/chat", json={"question": "When was IBM founded?", "cache": False}).json()
        assert bypass["cache_hit"] is False and mesh.answers == 2
        other_options = alice.post("/api/v1/chat", json={"question": "When was IBM founded?", "top_k": 3}).json()
        assert other_options["cache_hit"] is False and mesh.answers == 3
        # Prometheus sees the same lookups (the bypass made none): the hit rate a dashboard charts
        scraped = alice.get("/metrics").text
        assert 'ragmesh_cache_lookups_total{result="hit"} 2.0' in scraped
        assert 'ragmesh_cache_lookups_total{result="miss"} 2.0' in scraped
    for admin in client_for(tmp_path, mesh, flushed, "admin"):
        stats = admin.get("/api/v1/admin/cache").json()
        assert stats["hits"] == 2 and stats["misses"] == 2 and stats["hit_rate"] == 0.5
    for bob in client_for(tmp_path, mesh, flushed, "bob"):
        assert bob.get("/api/v1/admin/cache").status_code == 403
        assert bob.delete("/api/v1/admin/cache").status_code == 403  # and nothing is dropped
    # an admin clears it (after an upgrade of the model or the answer path): the next ask is answered anew
    for admin in client_for(tmp_path, mesh, flushed, "admin"):
        cleared = admin.delete("/api/v1/admin/cache")
        assert cleared.status_code == 200 and cleared.json() == {"cleared": 2}  # both option buckets' answers
        assert problems(spec, response_schema(spec, "/api/v1/admin/cache", "delete"), cleared.json()) == []
        assert admin.get("/api/v1/admin/cache").json()["entries"] == 0
        assert admin.get("/api/v1/admin/cache").json()["cleared"] == 2
        assert "ragmesh_cache_cleared_total 2.0" in admin.get("/metrics").text
    for alice in client_for(tmp_path, mesh, flushed, "alice"):
        again = alice.post("/api/v1/chat", json={"question": "When was IBM founded?"}).json()
        assert again["cache_hit"] is False and mesh.answers == 4


def test_a_hit_in_a_conversation_is_recorded_as_its_turn(tmp_path: Path, flushed: str) -> None:
    """An answer the cache serves in a stored conversation is appended to it like any other (it was not: the
    conversation lost the turn and the final event had no message id), with the documents of its sources."""
    mesh = CacheMesh(VERIFIED)
    conversation, message = str(uuid.uuid4()), str(uuid.uuid4())
    appended: list[retriever_pb2.AppendMessageRequest] = []

    async def append(request: retriever_pb2.AppendMessageRequest, **_: Any) -> retriever_pb2.AppendMessageResponse:
        appended.append(request)
        return retriever_pb2.AppendMessageResponse(message_id=message)

    mesh.retriever.replies["GetConversation"] = retriever_pb2.GetConversationResponse(
        conversation=retriever_pb2.Conversation(conversation_id=conversation)
    )
    mesh.retriever.replies["AppendMessage"] = None
    mesh.retriever.AppendMessage = append  # type: ignore[attr-defined]
    for alice in client_for(tmp_path, mesh, flushed, "alice"):
        first = alice.post("/api/v1/chat", json={"question": "When was IBM founded?"}).json()
        second = alice.post(
            "/api/v1/chat", json={"question": "In which year was IBM founded?", "conversation_id": conversation}
        ).json()
        assert first["cache_hit"] is False and second["cache_hit"] is True and mesh.answers == 1
        assert (second["conversation_id"], second["message_id"]) == (conversation, message)
        [turn] = appended
        assert (turn.conversation_id, turn.question, turn.answer) == (
            conversation,
            "In which year was IBM founded?",
            first["answer"],
        )
        assert list(turn.source_document_ids) == [DOC_ID] and turn.outcome == "answer"


class CloseMesh(CacheMesh):
    """An embedder that cannot tell "when" from "where" nor one year from another (MiniLM puts "When was IBM
    founded?" and "Where was IBM founded?" above the 0.95 cosine of a hit), and that reads a request around a
    question, word order and "in what place" as the same question."""

    async def _embed(self, request: embedder_pb2.EmbedRequest, **_: Any) -> embedder_pb2.EmbedResponse:
        said = re.findall(r"\w+", re.sub(r"\d+", "#", request.texts[0].lower()))
        text = " ".join(sorted(set(said) - {"can", "you", "tell", "me", "when", "where", "in", "what", "place"}))
        return embedder_pb2.EmbedResponse(vectors=[embedder_pb2.Vector(values=vec(hash(text) % 1000))])


def test_a_question_asking_for_another_kind_of_answer_or_other_numbers_never_borrows_an_answer(
    tmp_path: Path, flushed: str
) -> None:
    mesh = CloseMesh(VERIFIED)
    for alice in client_for(tmp_path, mesh, flushed, "alice"):
        when = alice.post("/api/v1/chat", json={"question": "When was IBM founded?"}).json()
        assert alice.post("/api/v1/chat", json={"question": "when was IBM founded"}).json()["cache_hit"] is True
        where = alice.post("/api/v1/chat", json={"question": "Where was IBM founded?"}).json()
        assert where["cache_hit"] is False and mesh.answers == 2  # a place is asked for, not a date
        # the same kind asked in other words, or inside a request, still shares the answer
        framed = alice.post("/api/v1/chat", json={"question": "Can you tell me when IBM was founded?"}).json()
        assert framed["cache_hit"] is True and framed["cached_trace_id"] == when["trace_id"]
        place = alice.post("/api/v1/chat", json={"question": "In what place was IBM founded?"}).json()
        assert place["cache_hit"] is True and place["cached_trace_id"] == where["trace_id"]
        assert mesh.answers == 2
        alice.post("/api/v1/chat", json={"question": "How many employees did IBM have in 2019?"})
        other_year = alice.post("/api/v1/chat", json={"question": "How many employees did IBM have in 2020?"}).json()
        assert other_year["cache_hit"] is False and mesh.answers == 4
        same_year = alice.post("/api/v1/chat", json={"question": "How many employees did IBM have in 2019"}).json()
        assert same_year["cache_hit"] is True and mesh.answers == 4


def test_the_ingestion_backlog_is_the_broker_queue_length_for_admins_only(tmp_path: Path, flushed: str) -> None:
    import redis as sync_redis

    from ragmesh_common.ingestion import QUEUE

    broker = sync_redis.Redis.from_url(flushed)
    for admin in client_for(tmp_path, CacheMesh(VERIFIED), flushed, "admin"):
        assert admin.get("/api/v1/admin/ingestion").json() == {"queued_tasks": 0}
        broker.rpush(QUEUE, "task-1", "task-2", "task-3")
        assert admin.get("/api/v1/admin/ingestion").json() == {"queued_tasks": 3}
    for bob in client_for(tmp_path, CacheMesh(VERIFIED), flushed, "bob"):
        assert bob.get("/api/v1/admin/ingestion").status_code == 403
    broker.delete(QUEUE)


def test_no_hit_for_a_user_without_access_nor_after_a_change(tmp_path: Path, flushed: str) -> None:
    mesh = CacheMesh(VERIFIED)
    for alice in client_for(tmp_path, mesh, flushed, "alice"):
        alice.post("/api/v1/chat", json={"question": "When was IBM founded?"})
    mesh.readers = {"alice"}  # bob loses access to the source (the fake search still returns it: a hit must not)
    for bob in client_for(tmp_path, mesh, flushed, "bob"):
        reply = bob.post("/api/v1/chat", json={"question": "When was IBM founded?"}).json()
        assert reply["cache_hit"] is False and mesh.answers == 2
    mesh.stamp = "v1-acl-changed"
    for alice in client_for(tmp_path, mesh, flushed, "alice"):
        reply = alice.post("/api/v1/chat", json={"question": "When was IBM founded?"}).json()
        assert reply["cache_hit"] is False and mesh.answers == 3


def test_a_withheld_answer_is_not_cached(tmp_path: Path, flushed: str) -> None:
    mesh = CacheMesh(WITHHELD)
    for alice in client_for(tmp_path, mesh, flushed, "alice"):
        for _ in range(2):
            reply = alice.post("/api/v1/chat", json={"question": "When was IBM founded?"}).json()
            assert reply["withheld"] is True and reply["cache_hit"] is False
        assert mesh.answers == 2


def test_the_question_is_embedded_once_and_never_for_a_lexical_only_search(tmp_path: Path, flushed: str) -> None:
    mesh = CacheMesh(VERIFIED)
    searched: list[retriever_pb2.SearchRequest] = []
    reply = mesh.retriever.replies["Search"]

    async def search(request: retriever_pb2.SearchRequest, **_: Any) -> Any:
        searched.append(request)
        return reply

    mesh.retriever.Search = search  # type: ignore[method-assign]
    for alice in client_for(tmp_path, mesh, flushed, "alice"):
        alice.post("/api/v1/chat", json={"question": "When was IBM founded?"})
        alice.post("/api/v1/chat", json={"question": "Who founded IBM?", "alpha": 0})
    assert list(searched[0].query_vector) == pytest.approx(vec(hash("when was ibm founded") % 1000), abs=1e-6)
    assert not searched[1].query_vector  # alpha 0: lexical only, as without the cache


def metric(text: str, name: str) -> float:
    """One sample's value from Prometheus' text format (0 when absent)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_metrics_count_hits_misses_stores_and_refusals_by_reason_without_user_labels(
    tmp_path: Path, flushed: str
) -> None:
    mesh = CacheMesh(VERIFIED)
    for alice in client_for(tmp_path, mesh, flushed, "alice"):
        alice.post("/api/v1/chat", json={"question": "When was IBM founded?"})  # miss, stored
        alice.post("/api/v1/chat", json={"question": "In which year was IBM founded?"})  # hit
        text = alice.get("/metrics").text
        assert metric(text, 'ragmesh_cache_lookups_total{result="hit"}') == 1
        assert metric(text, 'ragmesh_cache_lookups_total{result="miss"}') == 1
        assert metric(text, "ragmesh_cache_stores_total") == 1
        assert metric(text, 'ragmesh_cache_refusals_total{reason="unreadable"}') == 0
    mesh.readers = {"alice"}  # bob cannot read the source: the close entry is refused, not served
    for bob in client_for(tmp_path, mesh, flushed, "bob"):
        assert bob.post("/api/v1/chat", json={"question": "When was IBM founded?"}).json()["cache_hit"] is False
        text = bob.get("/metrics").text
        assert metric(text, 'ragmesh_cache_refusals_total{reason="unreadable"}') == 1
        assert metric(text, 'ragmesh_cache_lookups_total{result="miss"}') == 1
    mesh.readers = {"alice", "bob"}
    mesh.stamp = "v2"  # the source changed since the answer was cached
    for alice in client_for(tmp_path, mesh, flushed, "alice"):
        alice.post("/api/v1/chat", json={"question": "When was IBM founded?"})
        text = alice.get("/metrics").text
        assert metric(text, 'ragmesh_cache_refusals_total{reason="changed"}') == 1
        cache_lines = [line for line in text.splitlines() if line.startswith("ragmesh_cache_")]
        assert cache_lines and not any(w in line for line in cache_lines for w in ("alice", "bob", DOC_ID, "IBM"))


def test_clearing_a_cache_that_is_off_says_so(tmp_path: Path) -> None:
    config = settings(tmp_path).model_copy(update={"cache_enabled": False})
    token = mint(SECRET, "admin", "eng", ["admin"])
    with TestClient(
        create_app(config, mesh=CacheMesh(VERIFIED)), headers={"Authorization": f"Bearer {token}"}
    ) as admin:
        refused = admin.delete("/api/v1/admin/cache")
        assert refused.status_code == 409 and "GATEWAY_CACHE_ENABLED" in refused.text
        stats = admin.get("/api/v1/admin/cache").json()
        assert stats["enabled"] is False and stats["hit_rate"] is None and stats["entries"] == stats["cleared"] == 0

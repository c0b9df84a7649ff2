"""The permission-aware semantic cache of chat answers, kept in Redis (README, "Semantic cache").

An entry is a verified answer (the final event as the API sent it), the embedding of the standalone question it
answers, and the stamp of every document whose text went into it (every source given to the model). Entries are
grouped in buckets by the hash of the request options that change an answer (`option_key`); a lookup compares
the question's embedding with the bucket's cached ones in the gateway (numpy, one HGETALL), so that any Redis
works, the embedded one (6.2, no search module) included. A bucket holds at most `bucket_entries` questions and
the cache at most `max_entries`, the oldest going first.

A close entry is served only when the asking user may read every one of its documents now and none changed
since (`Stamps`: the retriever's GetDocumentStamps, under RLS, at hit time); so an entry is shared by exactly
the users whose access allows it. The document lifecycle also drops a document's entries on every change
(`invalidate`), so that a stale entry does not wait for its next hit to be found out.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from redis.asyncio import Redis

from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from ragmesh_common.context import UserContext

logger = logging.getLogger(__name__)

PREFIX = "ragmesh:cache"
STATS_KEY = f"{PREFIX}:stats"
ALL_KEY = f"{PREFIX}:all"  # zset "bucket|entry" -> stored time: the global cap and the TTL sweep
STATS = ("hits", "misses", "refused", "stores", "invalidated", "errors", "cleared")
MAX_TRIES = 3  # close entries checked for access per lookup before it counts as a miss

# The readable documents' stamps among the given ids, and the asker's accessible-document count.
Stamps = Callable[[UserContext, list[str]], Awaitable[tuple[dict[str, str], int]]]


def retriever_stamps(mesh: Any, timeout: float) -> Stamps:
    """`Stamps` from the retriever's GetDocumentStamps (`mesh.retriever`), called as the user: their RLS decides
    what comes back."""

    async def stamps(user: UserContext, document_ids: list[str]) -> tuple[dict[str, str], int]:
        retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub = mesh.retriever
        reply = await retriever.GetDocumentStamps(
            retriever_pb2.GetDocumentStampsRequest(document_ids=document_ids),
            metadata=user.metadata(),
            timeout=timeout,
        )
        return {d.document_id: d.stamp for d in reply.documents}, reply.accessible_documents

    return stamps


def option_key(options: dict[str, Any]) -> str:
    """The bucket of a request: a hash of every option that changes the answer (canonical JSON)."""
    canonical = json.dumps(options, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def unit(vector: Iterable[float]) -> np.ndarray[Any, np.dtype[np.float32]]:
    array = np.asarray(list(vector), dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else array


@dataclass(frozen=True)
class Hit:
    entry_id: str
    similarity: float
    payload: dict[str, Any]  # the cached final event
    trace_id: str  # the request whose answer it is
    question: str
    accessible_documents: int  # the asker's, from the hit-time check


@dataclass(frozen=True)
class Lookup:
    hit: Hit | None
    candidates: int  # cached questions compared
    best: float  # best cosine (0.0 when the bucket is empty)
    refused: int  # close entries not served: a source unreadable or changed
    reasons: dict[str, int] = field(default_factory=dict)  # refused entries by reason: unreadable, changed


class SemanticCache:
    def __init__(
        self,
        redis: Redis,
        stamps: Stamps,
        *,
        threshold: float,
        ttl_seconds: int,
        max_entries: int,
        bucket_entries: int,
    ) -> None:
        # redis-py's async return types are unions of sync and async results: the replies are read as Any
        self.redis: Any = redis
        self.stamps = stamps
        self.threshold = threshold
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self.bucket_entries = bucket_entries
        # this process' counters (metrics.py: hits, misses, stores, refusals by reason); set by the app
        self.observer: Callable[[str, int, str], None] | None = None

    @staticmethod
    def _entry(entry_id: str) -> str:
        return f"{PREFIX}:e:{entry_id}"

    @staticmethod
    def _vectors(bucket: str) -> str:
        return f"{PREFIX}:v:{bucket}"  # hash entry id -> float32 unit vector

    @staticmethod
    def _order(bucket: str) -> str:
        return f"{PREFIX}:o:{bucket}"  # zset entry id -> stored time (the bucket's cap)

    @staticmethod
    def _document(document_id: str) -> str:
        return f"{PREFIX}:d:{document_id}"  # set "bucket|entry" of the entries that used the document

    async def count(self, stat: str, n: int = 1, reason: str = "") -> None:
        """A statistic in Redis (all replicas' together, `stats`) and to this process' observer (its Prometheus
        counters, metrics.py); `reason` only for refusals."""
        if self.observer is not None:
            self.observer(stat, n, reason)
        try:
            await self.redis.hincrby(STATS_KEY, stat, n)
        except Exception:  # a counter never fails a chat
            logger.warning("cache counter %s not updated", stat, exc_info=True)

    async def lookup(self, user: UserContext, bucket: str, vector: Iterable[float]) -> Lookup:
        """The best cached answer within the threshold that this user may be served, if any."""
        raw = await self.redis.hgetall(self._vectors(bucket))
        if not raw:
            return Lookup(None, 0, 0.0, 0)
        ids = [key.decode() for key in raw]
        matrix = np.stack([np.frombuffer(raw[key], dtype=np.float32) for key in raw])
        query = unit(vector)
        if matrix.shape[1] != query.shape[0]:  # another embedding model filled this bucket
            await self._drop(bucket, ids)
            return Lookup(None, len(ids), 0.0, 0)
        scores = matrix @ query
        order = np.argsort(-scores)
        best = float(scores[order[0]])
        refused = 0
        reasons: dict[str, int] = {}
        for index in order[:MAX_TRIES]:
            similarity = float(scores[index])
            if similarity < self.threshold:
                break
            entry_id = ids[int(index)]
            fields = await self.redis.hgetall(self._entry(entry_id))
            if not fields:  # expired: its vector goes too
                await self._drop(bucket, [entry_id])
                continue
            documents: dict[str, str] = json.loads(fields[b"documents"])
            readable, accessible = await self.stamps(user, sorted(documents))
            unreadable = [d for d in documents if d not in readable]
            changed = [d for d in documents if d in readable and readable[d] != documents[d]]
            if changed:  # the document changed since: the entry is stale for everyone
                await self._drop(bucket, [entry_id])
            if unreadable or changed:
                refused += 1
                reason = "changed" if changed else "unreadable"
                reasons[reason] = reasons.get(reason, 0) + 1
                continue
            hit = Hit(
                entry_id=entry_id,
                similarity=similarity,
                payload=json.loads(fields[b"payload"]),
                trace_id=fields[b"trace_id"].decode(),
                question=fields[b"question"].decode(),
                accessible_documents=accessible,
            )
            return Lookup(hit, len(ids), best, refused, reasons)
        return Lookup(None, len(ids), best, refused, reasons)

    async def pin(self, user: UserContext, document_ids: Iterable[str]) -> dict[str, str] | None:
        """The stamps of an answer's documents as the asker reads them, taken before the answer is generated
        (a change during the generation then shows at hit time); None when one is not readable or not ready."""
        wanted = sorted(set(document_ids))
        if not wanted:
            return None
        readable, _ = await self.stamps(user, wanted)
        if any(d not in readable for d in wanted):
            return None
        return {d: readable[d] for d in wanted}

    async def store(
        self,
        bucket: str,
        vector: Iterable[float],
        *,
        question: str,
        payload: dict[str, Any],
        trace_id: str,
        stamps: dict[str, str],
    ) -> str:
        """Caches an answer (`payload`, the final event) under its documents' stamps (`pin`)."""
        entry_id = uuid.uuid4().hex
        member = f"{bucket}|{entry_id}"
        now = time.time()
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(
                self._entry(entry_id),
                mapping={
                    "payload": json.dumps(payload),
                    "trace_id": trace_id,
                    "question": question,
                    "bucket": bucket,
                    "documents": json.dumps(stamps),
                },
            )
            pipe.expire(self._entry(entry_id), self.ttl)
            pipe.hset(self._vectors(bucket), entry_id, unit(vector).tobytes())
            pipe.expire(self._vectors(bucket), self.ttl)
            pipe.zadd(self._order(bucket), {entry_id: now})
            pipe.expire(self._order(bucket), self.ttl)
            pipe.zadd(ALL_KEY, {member: now})
            for document_id in stamps:
                pipe.sadd(self._document(document_id), member)
                pipe.expire(self._document(document_id), self.ttl)
            pipe.hincrby(STATS_KEY, "stores", 1)
            await pipe.execute()
        if self.observer is not None:
            self.observer("stores", 1, "")
        await self._bound(bucket, now)
        return entry_id

    async def _bound(self, bucket: str, now: float) -> None:
        """The bucket's cap, the global cap and the TTL sweep: the oldest entries go."""
        over = await self.redis.zcard(self._order(bucket)) - self.bucket_entries
        if over > 0:
            oldest = await self.redis.zrange(self._order(bucket), 0, over - 1)
            await self._drop(bucket, [e.decode() for e in oldest])
        expired = await self.redis.zrangebyscore(ALL_KEY, "-inf", now - self.ttl)
        over = await self.redis.zcard(ALL_KEY) - len(expired) - self.max_entries
        if over > 0:
            expired += await self.redis.zrange(ALL_KEY, len(expired), len(expired) + over - 1)
        await self._drop_members([m.decode() for m in expired])

    async def _drop_members(self, members: list[str]) -> None:
        by_bucket: dict[str, list[str]] = {}
        for member in members:
            bucket, _, entry_id = member.partition("|")
            by_bucket.setdefault(bucket, []).append(entry_id)
        for bucket, ids in by_bucket.items():
            await self._drop(bucket, ids)

    async def _drop(self, bucket: str, ids: list[str]) -> None:
        if not ids:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hdel(self._vectors(bucket), *ids)
            pipe.zrem(self._order(bucket), *ids)
            pipe.zrem(ALL_KEY, *(f"{bucket}|{i}" for i in ids))
            pipe.delete(*(self._entry(i) for i in ids))
            await pipe.execute()

    async def invalidate(self, document_id: str) -> int:
        """Drops every entry that used the document (its version, ACL, title or existence changed)."""
        key = self._document(document_id)
        members = [m.decode() for m in await self.redis.smembers(key)]
        await self._drop_members(members)
        await self.redis.delete(key)
        if members:
            await self.count("invalidated", len(members))
            logger.info("semantic cache: %d entries of document %s dropped", len(members), document_id)
        return len(members)

    async def clear(self) -> int:
        """Drops every entry (after an upgrade of the model or the answer path: answers made by the old one
        are not served for the rest of their TTL); the counters stay. Returns how many entries there were."""
        entries = int(await self.redis.zcard(ALL_KEY))
        batch: list[bytes] = []
        async for key in self.redis.scan_iter(match=f"{PREFIX}:[evod]:*", count=500):
            batch.append(key)
            if len(batch) >= 500:
                await self.redis.delete(*batch)
                batch.clear()
        if batch:
            await self.redis.delete(*batch)
        await self.redis.delete(ALL_KEY)
        await self.count("cleared", entries)
        return entries

    async def stats(self) -> dict[str, Any]:
        raw = await self.redis.hgetall(STATS_KEY)
        counts = {name: int(raw.get(name.encode(), 0)) for name in STATS}
        lookups = counts["hits"] + counts["misses"]
        return {
            **counts,
            "entries": int(await self.redis.zcard(ALL_KEY)),
            "hit_rate": round(counts["hits"] / lookups, 4) if lookups else None,
        }

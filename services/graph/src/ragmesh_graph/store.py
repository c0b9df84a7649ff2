"""The entity graph in Neo4j 5 over Bolt (ArcadeDB's Bolt server on one machine), through the async neo4j driver.

Model (services/graph/README.md, "Graph model", says the same for readers of the data):
    (:Entity {key, name, type, initials, first})   key = resolved normalised name, unique; type = spaCy label
                                                   (PERSON, ORG, GPE, ...) or a rule type (acronym, name, term)
    (:Chunk {uid, id, document_id, owner})         uid = document_id + "/" + chunk id, unique; owner = the uploader
    (:Chunk)-[:MENTIONS {document_id, surfaces, count}]->(:Entity)
    (:Entity)-[:RELATED {document_id, predicate, weight, chunk_ids}]->(:Entity)
    (:Alias {uid, key, surface, entity, reason, document_id})   a merge and why (uid = document_id + "/" + key)

A relation is stored once PER DOCUMENT and predicate (one RELATED edge per entity pair, predicate and
document, pointing from the smaller key to the larger), never summed across documents; an entity's provenance
is its MENTIONS edges (each names its chunk and document). Reading, every mention, relation and alias is
filtered by `document_id IN $document_ids` (the readable documents) and the weights of those documents are
summed then, so a user sees exactly the evidence in documents they may read, and deleting or re-ingesting a
document touches only its own edges and aliases.

Portable Cypher only (the subset Neo4j 5 and ArcadeDB both run): MERGE, UNWIND, list parameters, pattern
predicates; no full-text/vector index DDL, no APOC, no variable-length paths (hops are one query each so
that weights aggregate per hop). Parameters never carry nulls or mixed-type lists (Neo4j rejects null
MERGE keys; ArcadeDB would accept them). Concurrent MERGEs of one new entity make the loser fail with
ConstraintError on both engines; it and transient errors (deadlocks, ArcadeDB's concurrent page changes)
are retried with jittered backoff.

Re-ingest is delete-then-merge in batches, one transaction each (bounded transaction size): a reader may see
the document half-written for a moment, and a failed batch leaves it partial until the caller retries the
(idempotent) ingest.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import neo4j
from neo4j import AsyncDriver, AsyncTransaction
from neo4j.exceptions import ConstraintError, Neo4jError, ServiceUnavailable, SessionExpired, TransientError

from ragmesh_common.errors import Unavailable
from ragmesh_graph.extract import DocumentGraph, Entity
from ragmesh_graph.resolve import Known, first_word, initials, known_from_rows

logger = logging.getLogger(__name__)

T = TypeVar("T")
# The subset of the given document ids the caller may read (the catalogue's answer)
Readable = Callable[[set[str]], Awaitable[set[str]]]

RETRYABLE = (ConstraintError, TransientError, ServiceUnavailable, SessionExpired)
# ArcadeDB's Bolt server answers every internal failure as Neo.DatabaseError.General.UnknownError; a lock it could
# not take ("Error in execution in lock", seen on the first read after a 2.4M-row load) or a concurrent
# modification is transient there, as Neo4j's own TransientError is
_LOCK_CONFLICT = re.compile(r"\block(?:ing|ed)?\b|concurrent\s*modification", re.IGNORECASE)


def lock_conflict(exc: Exception) -> bool:
    """A database error that is a lock or concurrent-modification conflict (retried like a TransientError)."""
    return (
        isinstance(exc, Neo4jError)
        and (exc.code or "").startswith("Neo.DatabaseError.")
        and bool(_LOCK_CONFLICT.search(exc.message or ""))
    )


RELATION_TYPE = "RELATED"
BATCH_ROWS = 500
HOP_ROW_CAP = 1000  # relations read per hop, the heaviest first
MAX_CONTEXT_CHUNKS = 50

SCHEMA = (
    "CREATE CONSTRAINT ragmesh_entity_key IF NOT EXISTS FOR (e:Entity) REQUIRE e.key IS UNIQUE",
    "CREATE CONSTRAINT ragmesh_chunk_uid IF NOT EXISTS FOR (c:Chunk) REQUIRE c.uid IS UNIQUE",
    "CREATE CONSTRAINT ragmesh_alias_uid IF NOT EXISTS FOR (a:Alias) REQUIRE a.uid IS UNIQUE",
    "CREATE INDEX ragmesh_chunk_document IF NOT EXISTS FOR (c:Chunk) ON (c.document_id)",
    "CREATE INDEX ragmesh_alias_key IF NOT EXISTS FOR (a:Alias) ON (a.key)",
    "CREATE INDEX ragmesh_alias_document IF NOT EXISTS FOR (a:Alias) ON (a.document_id)",
    "CREATE INDEX ragmesh_entity_initials IF NOT EXISTS FOR (e:Entity) ON (e.initials)",
    "CREATE INDEX ragmesh_entity_first IF NOT EXISTS FOR (e:Entity) ON (e.first)",
    "CREATE INDEX ragmesh_related_document IF NOT EXISTS FOR ()-[r:RELATED]-() ON (r.document_id)",
)

Q_DOCUMENT_ENTITY_KEYS = """
MATCH (c:Chunk)-[:MENTIONS]->(e:Entity) WHERE c.document_id = $document_id
RETURN DISTINCT e.key AS key
"""
Q_DELETE_RELATIONS = """
MATCH (:Entity)-[r:RELATED]->(:Entity) WHERE r.document_id = $document_id
DELETE r
"""
Q_DELETE_ALIASES = "MATCH (a:Alias) WHERE a.document_id = $document_id DELETE a"
Q_COUNT_CHUNKS = "MATCH (c:Chunk) WHERE c.document_id = $document_id RETURN count(c) AS n"
Q_DELETE_CHUNKS = "MATCH (c:Chunk) WHERE c.document_id = $document_id DETACH DELETE c"
Q_DELETE_ORPHANS = """
UNWIND $keys AS k
MATCH (e:Entity {key: k}) WHERE NOT ()-[:MENTIONS]->(e)
DETACH DELETE e
"""
Q_MERGE_CHUNKS = """
UNWIND $rows AS row
MERGE (c:Chunk {uid: row.uid})
SET c.id = row.id, c.document_id = $document_id, c.owner = $owner
"""
Q_DOCUMENT_OWNERS = """
MATCH (c:Chunk) WHERE c.document_id = $document_id
RETURN DISTINCT coalesce(c.owner, '') AS owner
"""
Q_MERGE_MENTIONS = """
UNWIND $rows AS row
MERGE (e:Entity {key: row.key})
ON CREATE SET e.name = row.name, e.type = row.type, e.initials = row.initials, e.first = row.first
WITH e, row
MATCH (c:Chunk {uid: row.uid})
MERGE (c)-[m:MENTIONS]->(e)
SET m.document_id = $document_id, m.surfaces = row.surfaces
"""
Q_MERGE_RELATIONS = """
UNWIND $rows AS row
MERGE (a:Entity {key: row.a})
ON CREATE SET a.name = row.a_name, a.type = row.a_type, a.initials = row.a_initials, a.first = row.a_first
MERGE (b:Entity {key: row.b})
ON CREATE SET b.name = row.b_name, b.type = row.b_type, b.initials = row.b_initials, b.first = row.b_first
MERGE (a)-[r:RELATED {document_id: $document_id, predicate: row.predicate}]->(b)
SET r.weight = row.weight, r.chunk_ids = row.chunk_ids
"""
Q_MERGE_ALIASES = """
UNWIND $rows AS row
MERGE (a:Alias {uid: row.uid})
SET a.key = row.key, a.surface = row.surface, a.entity = row.entity, a.reason = row.reason,
    a.document_id = $document_id
"""
# Entity resolution: what the graph already knows about a new document's keys
Q_KNOWN_ALIASES = """
UNWIND $keys AS k
MATCH (a:Alias {key: k})
RETURN a.key AS key, a.entity AS entity, a.reason AS reason, a.document_id AS document_id
"""
Q_KNOWN_BY_INITIALS = """
UNWIND $values AS v
MATCH (e:Entity {initials: v})
RETURN e.key AS key, coalesce(e.type, '') AS type, e.initials AS initials, coalesce(e.first, '') AS first
LIMIT $cap
"""
Q_KNOWN_BY_FIRST_WORD = """
UNWIND $values AS v
MATCH (e:Entity {first: v})
RETURN e.key AS key, coalesce(e.type, '') AS type, coalesce(e.initials, '') AS initials, e.first AS first
LIMIT $cap
"""
Q_ENTITIES_WITH_CHUNKS = """
UNWIND $keys AS k
MATCH (e:Entity {key: k})<-[:MENTIONS]-(c:Chunk)
WHERE c.document_id IN $document_ids
RETURN e.key AS key, e.name AS name, e.type AS type, collect(DISTINCT c.id) AS chunk_ids
"""
Q_ENTITY_MENTIONS = """
UNWIND $keys AS k
MATCH (e:Entity {key: k})<-[:MENTIONS]-(c:Chunk)
WHERE c.document_id IN $document_ids
RETURN e.key AS key, e.name AS name, e.type AS type, count(DISTINCT c) AS mentions
"""
# The documents a filtered read below could touch, asked of the catalogue before that read
Q_MENTION_DOCUMENTS = """
UNWIND $keys AS k
MATCH (:Entity {key: k})<-[:MENTIONS]-(c:Chunk)
RETURN DISTINCT c.document_id AS document_id
"""
Q_ALIASES = """
UNWIND $keys AS k
MATCH (a:Alias {key: k})
RETURN a.key AS key, a.entity AS entity, a.surface AS surface, a.reason AS reason, a.document_id AS document_id
"""
Q_HOP_DOCUMENTS = """
UNWIND $keys AS k
MATCH (:Entity {key: k})-[r:RELATED]-(:Entity)
RETURN DISTINCT r.document_id AS document_id
"""
Q_HOP = """
UNWIND $keys AS k
MATCH (a:Entity {key: k})-[r:RELATED]-(b:Entity)
WHERE r.document_id IN $document_ids
RETURN a.key AS a, a.name AS a_name, b.key AS b, b.name AS b_name, r.document_id AS document_id,
       r.predicate AS predicate, r.weight AS weight, r.chunk_ids AS chunk_ids
ORDER BY weight DESC
LIMIT $cap
"""
# The readable subgraph (PageRank leg, communities): mentions and relations of readable documents only
# The neighbourhood reads in two steps per hop: how many chunks of each document mention each key (rows of
# documents the catalogue does not admit are dropped), then, for the keys chosen to expand, at most $limit of
# their chunks not read yet in admitted documents with every entity those chunks mention (the key itself too: two MATCH
# clauses, since one pattern may not use a relationship twice)
Q_MENTION_COUNTS = """
UNWIND $keys AS k
MATCH (:Entity {key: k})<-[:MENTIONS]-(c:Chunk)
RETURN k AS key, c.document_id AS document_id, count(c) AS chunks
"""
Q_ENTITIES_OF_CHUNKS = """
UNWIND $uids AS u
MATCH (c:Chunk {uid: u})-[:MENTIONS]->(e:Entity)
RETURN c.uid AS uid, c.document_id AS document_id, e.key AS key
"""
Q_CHUNKS_OF_ENTITIES = """
UNWIND $keys AS k
MATCH (:Entity {key: k})<-[:MENTIONS]-(c:Chunk)
WHERE c.document_id IN $document_ids AND NOT c.uid IN $seen
WITH DISTINCT c
ORDER BY c.uid
LIMIT $limit
MATCH (c)-[:MENTIONS]->(f:Entity)
RETURN c.uid AS uid, c.id AS chunk_id, c.document_id AS document_id, f.key AS key, f.name AS name, f.type AS type
"""
Q_MENTIONS_OF_DOCUMENTS = """
UNWIND $document_ids AS d
MATCH (c:Chunk {document_id: d})-[m:MENTIONS]->(e:Entity)
RETURN e.key AS key, e.name AS name, e.type AS type, c.uid AS uid, c.id AS chunk_id, c.document_id AS document_id,
       m.surfaces AS surfaces
"""
Q_RELATIONS_AMONG = """
UNWIND $keys AS k
MATCH (a:Entity {key: k})-[r:RELATED]->(b:Entity)
WHERE b.key IN $keys AND r.document_id IN $document_ids
RETURN a.key AS a, b.key AS b, r.predicate AS predicate, r.weight AS weight, r.document_id AS document_id,
       r.chunk_ids AS chunk_ids
ORDER BY weight DESC, a, b
LIMIT $cap
"""
Q_RELATIONS_OF_DOCUMENTS = """
UNWIND $document_ids AS d
MATCH (c:Chunk {document_id: d})-[:MENTIONS]->(a:Entity)-[r:RELATED]->(b:Entity)
WHERE r.document_id = d
RETURN DISTINCT a.key AS a, b.key AS b, r.predicate AS predicate, r.weight AS weight, r.document_id AS document_id,
       r.chunk_ids AS chunk_ids
"""


@dataclass
class EntityInfo:
    key: str
    name: str
    type: str
    mentions: int = 0
    chunk_ids: list[str] = field(default_factory=list)


@dataclass
class RelationInfo:
    source: str  # names, the smaller key first
    target: str
    weight: float
    chunk_ids: list[str]
    depth: int
    type: str = RELATION_TYPE


@dataclass(frozen=True)
class SubgraphMention:
    key: str  # entity key
    uid: str  # chunk uid (document_id/chunk_id)
    chunk_id: str
    document_id: str


@dataclass(frozen=True)
class SubgraphRelation:
    a: str  # entity keys, the smaller first
    b: str
    predicate: str
    weight: float
    document_id: str
    chunk_ids: tuple[str, ...]


@dataclass
class Subgraph:
    """A part of the entity graph built only from documents the caller may read: entities (key → info),
    mentions (entity–chunk) and relations, each naming its chunk(s) and document. `documents` are the readable
    documents it was read from; `seeds` the entities the read started from (neighbourhood reads)."""

    entities: dict[str, EntityInfo] = field(default_factory=dict)
    mentions: list[SubgraphMention] = field(default_factory=list)
    relations: list[SubgraphRelation] = field(default_factory=list)
    documents: set[str] = field(default_factory=set)
    seeds: list[str] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)  # a seed key read through a readable alias → entity key
    hubs: int = 0  # entities reached but not expanded: in more than the hub limit of readable chunks
    seed_weights: dict[str, float] = field(default_factory=dict)  # seed → restart weight (1 = named in the question)
    named: list[str] = field(default_factory=list)  # the seeds the question itself names (not only a seed passage)
    capped: str = ""  # what the size caps left out (neighbourhood reads), "" when nothing

    def add_mention(self, row: Any) -> None:
        """A mention row (key, name, type, uid, chunk_id, document_id): the mention, and its entity counted."""
        self.mentions.append(SubgraphMention(row["key"], row["uid"], row["chunk_id"], row["document_id"]))
        info = self.entities.get(row["key"])
        if info is None:
            info = self.entities[row["key"]] = EntityInfo(row["key"], row["name"], row["type"])
        info.mentions += 1
        info.chunk_ids.append(row["chunk_id"])

    def add_relation(self, row: Any) -> None:
        """A relation row (a, b, predicate, weight, document_id, chunk_ids), its ends in key order."""
        a, b = sorted((row["a"], row["b"]))
        self.relations.append(
            SubgraphRelation(
                a,
                b,
                str(row["predicate"] or RELATION_TYPE),
                float(row["weight"]),
                row["document_id"],
                tuple(row["chunk_ids"] or ()),
            )
        )


@dataclass
class GraphContext:
    matched: list[EntityInfo] = field(default_factory=list)
    neighbours: list[EntityInfo] = field(default_factory=list)
    relations: list[RelationInfo] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)


def _batches(rows: Sequence[dict[str, Any]], size: int = BATCH_ROWS) -> list[list[dict[str, Any]]]:
    return [list(rows[i : i + size]) for i in range(0, len(rows), size)]


def chunk_uid(document_id: str, chunk_id: str) -> str:
    return f"{document_id}/{chunk_id}"


def _entity_props(entity: Entity, prefix: str = "") -> dict[str, str]:
    return {
        f"{prefix}name": entity.name,
        f"{prefix}type": entity.type,
        f"{prefix}initials": initials(entity.key),
        f"{prefix}first": first_word(entity.key),
    }


KNOWN_CAP = 5000  # graph entities read per ingest for acronym / similar-name resolution


class GraphStore:
    """Reads and writes the entity graph; every statement runs in a transaction with a timeout."""

    def __init__(self, driver: AsyncDriver, database: str, timeout: float, attempts: int = 6) -> None:
        self.driver = driver
        self.database = database
        self.timeout = timeout
        self.attempts = attempts

    @classmethod
    def connect(cls, uri: str, user: str, password: str, database: str, timeout: float) -> GraphStore:
        """A store over a new driver (it connects lazily: `warmup` checks the connection)."""
        driver = neo4j.AsyncGraphDatabase.driver(
            uri,
            auth=(user, password),
            connection_timeout=timeout,
            connection_acquisition_timeout=timeout,
            max_connection_pool_size=50,
            user_agent="ragmesh-graph",
        )
        return cls(driver, database, timeout)

    async def close(self) -> None:
        await self.driver.close()

    # ---------- lifecycle ----------
    async def warmup(self, connect_deadline: float = 60.0) -> None:
        """Waits for the database (up to `connect_deadline` seconds), then creates constraints and indexes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + connect_deadline
        while True:
            try:
                async with asyncio.timeout(self.timeout):
                    await self.driver.verify_connectivity()
                    async with self.driver.session(database=self.database) as session:  # the database exists
                        await (await session.run(neo4j.Query("RETURN 1 AS one", timeout=self.timeout))).consume()
                break
            except (Neo4jError, ServiceUnavailable, SessionExpired, OSError, TimeoutError) as exc:
                if loop.time() >= deadline:
                    raise Unavailable(f"graph database not reachable: {exc}") from exc
                logger.warning("graph database not reachable yet (%s); retrying", exc)
                await asyncio.sleep(1.0)
        await self.setup_schema()

    async def setup_schema(self) -> None:
        """Uniqueness constraints and indexes where the backend has them; one it rejects is logged and skipped."""
        for statement in SCHEMA:
            try:
                async with asyncio.timeout(self.timeout + 2):
                    async with self.driver.session(database=self.database) as session:
                        result = await session.run(neo4j.Query(statement, timeout=self.timeout))
                        await result.consume()
            except (Neo4jError, TimeoutError) as exc:
                logger.warning("graph schema statement not supported by this backend, skipped: %s (%s)", statement, exc)

    # ---------- transactions ----------
    async def _transaction(self, work: Callable[[AsyncTransaction], Awaitable[T]], *, write: bool, what: str) -> T:
        """Runs `work` in one transaction, retrying constraint races and transient errors with backoff."""
        mode = neo4j.WRITE_ACCESS if write else neo4j.READ_ACCESS
        delay = 0.05
        for attempt in range(1, self.attempts + 1):
            try:
                # The server-side transaction timeout bounds the query; the client-side one bounds a backend
                # that ignores it or a network that stalls.
                async with asyncio.timeout(self.timeout + 2):
                    async with (
                        self.driver.session(database=self.database, default_access_mode=mode) as session,
                        await session.begin_transaction(timeout=self.timeout) as tx,
                    ):
                        result = await work(tx)
                        await tx.commit()
                        return result
            except TimeoutError:
                raise TimeoutError(
                    f"graph {what} took longer than {self.timeout:.0f}s (GRAPH_QUERY_TIMEOUT_SECONDS)"
                ) from None
            except (*RETRYABLE, Neo4jError) as exc:
                if isinstance(exc, Neo4jError) and "TimedOut" in (exc.code or ""):
                    raise TimeoutError(f"graph {what} timed out in the database: {exc.code}") from exc
                if not isinstance(exc, RETRYABLE) and not lock_conflict(exc):
                    raise
                if attempt == self.attempts:
                    raise Unavailable(f"graph {what} failed after {attempt} attempts: {exc}") from exc
                logger.info("graph %s: %s on attempt %d/%d, retrying", what, type(exc).__name__, attempt, self.attempts)
                await asyncio.sleep(delay * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not security
                delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    @staticmethod
    async def _run(tx: AsyncTransaction, text: str, **params: Any) -> list[dict[str, Any]]:
        result = await tx.run(text, params)
        return await result.data()

    # ---------- writes ----------
    async def replace_document(self, graph: DocumentGraph, owner: str, *, previous: bool = True) -> None:
        """Removes the document's previous contribution, then merges the new one in batches (idempotent).

        `owner` (the user the catalogue says owns the document) is recorded on its chunks: a delete, which comes
        after the catalogue row is gone, is checked against it. `previous=False` (the caller just found nothing
        of the document in the graph) skips the delete; a document that fits one batch is written in one
        transaction (chunks, mentions and relations), a large one in a transaction per batch."""
        if previous:
            await self.delete_document(graph.document_id)
        doc = graph.document_id
        names = graph.entities
        mentions_by_chunk: dict[str, list[dict[str, Any]]] = {}
        for key, chunk_id in graph.mentions:
            entity = names[key]
            mentions_by_chunk.setdefault(chunk_id, []).append(
                {
                    "key": key,
                    **_entity_props(entity),
                    "uid": chunk_uid(doc, chunk_id),
                    "surfaces": sorted(graph.surfaces.get((key, chunk_id), {entity.name})),
                }
            )
        chunk_rows = [{"uid": chunk_uid(doc, chunk_id), "id": chunk_id} for chunk_id in graph.chunk_ids]
        relation_rows = [
            {
                "a": a,
                **_entity_props(names[a], "a_"),
                "b": b,
                **_entity_props(names[b], "b_"),
                "predicate": predicate,
                "weight": stats.weight,
                "chunk_ids": list(stats.chunk_ids),
            }
            for (a, b, predicate), stats in graph.relations.items()
        ]
        alias_rows = [
            {
                "uid": chunk_uid(doc, alias.key),
                "key": alias.key,
                "surface": alias.surface,
                "entity": alias.target,
                "reason": alias.reason,
            }
            for alias in graph.aliases
        ]
        if len(chunk_rows) <= BATCH_ROWS and len(relation_rows) <= BATCH_ROWS:
            mention_rows = [row for chunk in chunk_rows for row in mentions_by_chunk.get(chunk["id"], [])]

            async def write_all(tx: AsyncTransaction) -> None:
                await self._run(tx, Q_MERGE_CHUNKS, rows=chunk_rows, document_id=doc, owner=owner)
                for rows in _batches(mention_rows):
                    await self._run(tx, Q_MERGE_MENTIONS, rows=rows, document_id=doc)
                if relation_rows:
                    await self._run(tx, Q_MERGE_RELATIONS, rows=relation_rows, document_id=doc)
                for rows in _batches(alias_rows):
                    await self._run(tx, Q_MERGE_ALIASES, rows=rows, document_id=doc)

            await self._transaction(write_all, write=True, what="ingest document")
            return
        for batch in _batches(chunk_rows):
            mention_rows = [row for chunk in batch for row in mentions_by_chunk.get(chunk["id"], [])]

            async def write_chunks(
                tx: AsyncTransaction,
                batch: list[dict[str, Any]] = batch,
                mention_rows: list[dict[str, Any]] = mention_rows,
            ) -> None:
                await self._run(tx, Q_MERGE_CHUNKS, rows=batch, document_id=doc, owner=owner)
                for rows in _batches(mention_rows):
                    await self._run(tx, Q_MERGE_MENTIONS, rows=rows, document_id=doc)

            await self._transaction(write_chunks, write=True, what="ingest chunks")
        for batch in _batches(relation_rows):

            async def write_relations(tx: AsyncTransaction, batch: list[dict[str, Any]] = batch) -> None:
                await self._run(tx, Q_MERGE_RELATIONS, rows=batch, document_id=doc)

            await self._transaction(write_relations, write=True, what="ingest relations")
        for batch in _batches(alias_rows):

            async def write_aliases(tx: AsyncTransaction, batch: list[dict[str, Any]] = batch) -> None:
                await self._run(tx, Q_MERGE_ALIASES, rows=batch, document_id=doc)

            await self._transaction(write_aliases, write=True, what="ingest aliases")

    async def known(self, keys: list[str], acronyms: list[str], firsts: list[str]) -> Known:
        """What the graph knows that a new document's keys may resolve to: recorded aliases of those keys, and
        entities whose initials are one of `acronyms` or whose first word is one of `firsts` (at most
        KNOWN_CAP). Used at ingest only, as the document's owner: a merge changes which node a mention attaches
        to, never what a reader sees (reads filter every mention, relation and alias by readable document)."""

        async def work(tx: AsyncTransaction) -> Known:
            aliases = await self._run(tx, Q_KNOWN_ALIASES, keys=keys) if keys else []
            entities = [
                *(await self._run(tx, Q_KNOWN_BY_INITIALS, values=acronyms, cap=KNOWN_CAP) if acronyms else []),
                *(await self._run(tx, Q_KNOWN_BY_FIRST_WORD, values=firsts, cap=KNOWN_CAP) if firsts else []),
            ]
            return known_from_rows(
                [(r["key"], r["entity"], r["reason"]) for r in aliases],
                [(r["key"], r["type"], r["initials"], r["first"]) for r in entities],
                set(acronyms),
            )

        return await self._transaction(work, write=False, what="resolution lookup")

    async def document_owners(self, document_id: str) -> set[str]:
        """The owners recorded on the document's chunks ("" for chunks written before owners were recorded);
        empty when the graph holds nothing of the document."""

        async def work(tx: AsyncTransaction) -> set[str]:
            return {row["owner"] for row in await self._run(tx, Q_DOCUMENT_OWNERS, document_id=document_id)}

        return await self._transaction(work, write=False, what="document owner")

    async def delete_document(self, document_id: str) -> int:
        """Removes the document's chunks, mentions and relations, and entities no longer mentioned anywhere."""

        async def work(tx: AsyncTransaction) -> int:
            keys = [row["key"] for row in await self._run(tx, Q_DOCUMENT_ENTITY_KEYS, document_id=document_id)]
            await self._run(tx, Q_DELETE_RELATIONS, document_id=document_id)
            await self._run(tx, Q_DELETE_ALIASES, document_id=document_id)
            count = await self._run(tx, Q_COUNT_CHUNKS, document_id=document_id)
            await self._run(tx, Q_DELETE_CHUNKS, document_id=document_id)
            for batch in range(0, len(keys), BATCH_ROWS):
                await self._run(tx, Q_DELETE_ORPHANS, keys=keys[batch : batch + BATCH_ROWS])
            return int(count[0]["n"]) if count else 0

        return await self._transaction(work, write=True, what="delete document")

    # ---------- reads ----------
    async def context(self, keys: list[str], readable: Readable, max_depth: int, limit: int) -> GraphContext:
        """Entities among `keys` mentioned in readable documents, and their neighbourhood up to `max_depth` hops.

        Only mentions and relations recorded for documents `readable` admits count: before each read, the
        documents that read could touch are looked up and `readable` is asked about those not asked yet, so
        the read sees exactly what it would see given every readable document.
        """
        if not keys:
            return GraphContext()

        async def work(tx: AsyncTransaction) -> GraphContext:
            asked: set[str] = set()
            allowed: set[str] = set()

            async def readable_among(query: str, among: list[str]) -> list[str]:
                found = {row["document_id"] for row in await self._run(tx, query, keys=among)}
                if found - asked:
                    allowed.update(await readable(found - asked))
                    asked.update(found)
                return sorted(found & allowed)

            document_ids = await readable_among(Q_MENTION_DOCUMENTS, keys)
            if not document_ids:
                return GraphContext()
            rows = await self._run(tx, Q_ENTITIES_WITH_CHUNKS, keys=keys, document_ids=document_ids)
            matched = {
                row["key"]: EntityInfo(
                    row["key"], row["name"], row["type"], len(row["chunk_ids"]), sorted(row["chunk_ids"])
                )
                for row in rows
            }
            if not matched:
                return GraphContext()
            pairs: dict[tuple[str, str, str], RelationInfo] = {}
            seen_edges: set[tuple[str, str, str, str]] = set()
            depth_of = dict.fromkeys(matched, 0)
            frontier = list(matched)
            for depth in range(1, max_depth + 1):
                if not frontier:
                    break
                hop_documents = await readable_among(Q_HOP_DOCUMENTS, frontier)
                hop = (
                    await self._run(tx, Q_HOP, keys=frontier, document_ids=hop_documents, cap=HOP_ROW_CAP)
                    if hop_documents
                    else []
                )
                reached: list[str] = []
                for row in hop:
                    (a, a_name), (b, b_name) = sorted([(row["a"], row["a_name"]), (row["b"], row["b_name"])])
                    predicate = str(row["predicate"] or RELATION_TYPE)
                    edge = (a, b, predicate, row["document_id"])
                    if edge in seen_edges:  # both ends in the frontier: the same edge read from each side
                        continue
                    seen_edges.add(edge)
                    relation = pairs.get((a, b, predicate))
                    if relation is None:
                        relation = pairs[(a, b, predicate)] = RelationInfo(a_name, b_name, 0.0, [], depth, predicate)
                    elif relation.depth != depth:
                        continue  # found at a shorter depth already
                    relation.weight += float(row["weight"])
                    relation.chunk_ids.extend(c for c in row["chunk_ids"] if c not in relation.chunk_ids)
                    for key in (a, b):
                        if key not in depth_of:
                            depth_of[key] = depth
                            reached.append(key)
                frontier = reached
            relations = sorted(pairs.items(), key=lambda item: (-item[1].weight, item[1].depth, item[0]))[:limit]
            strength: dict[str, float] = {}
            for (a, b, _), relation in relations:
                for key in (a, b):
                    if key not in matched:
                        strength[key] = strength.get(key, 0.0) + relation.weight
            neighbours: list[EntityInfo] = []
            if strength:
                mention_documents = await readable_among(Q_MENTION_DOCUMENTS, list(strength))
                rows = await self._run(tx, Q_ENTITY_MENTIONS, keys=list(strength), document_ids=mention_documents)
                found = {
                    row["key"]: EntityInfo(row["key"], row["name"], row["type"], int(row["mentions"])) for row in rows
                }
                neighbours = [
                    found[key] for key in sorted(strength, key=lambda k: (-strength[k], depth_of[k], k)) if key in found
                ]
            chunk_votes: Counter[str] = Counter(c for entity in matched.values() for c in entity.chunk_ids)
            chunk_ids = sorted(chunk_votes, key=lambda c: (-chunk_votes[c], c))[:MAX_CONTEXT_CHUNKS]
            ordered = sorted(matched.values(), key=lambda e: (-e.mentions, e.key))
            return GraphContext(ordered, neighbours, [relation for _, relation in relations], chunk_ids)

        return await self._transaction(work, write=False, what="context")

    async def neighbourhood(
        self,
        keys: list[str],
        readable: Readable,
        *,
        hops: int = 2,
        hub_chunks: int = 200,
        max_chunks: int = 2000,
        max_relations: int = 5000,
        seed_chunks: Sequence[str] = (),
        passage_weight: float = 0.5,
    ) -> Subgraph:
        """The readable subgraph around the entities named by `keys` (entity keys, or alias keys of a readable
        document's merges): the seeds' chunks, then `hops` times the other chunks of the entities those chunks
        mention. Before each hop the readable chunks of each key are counted (per document, the catalogue asked
        about new documents), so that only what is expanded is read: an entity in more than `hub_chunks`
        readable chunks ("United States") is kept but not expanded (a seed too, unless every seed is one), and
        the keys are expanded most specific first while the subgraph stays within `max_chunks` chunks. What the
        cap left out is said in `Subgraph.capped` (the caller logs and traces it). Relations are those among the
        entities reached, recorded in the documents reached, at most `max_relations` (the heaviest first).
        `seed_chunks` (chunk uids, best first: the top passages of a first search) add the entities they mention
        as seeds, the i-th chunk's with weight `passage_weight` / (i + 1) (`Subgraph.seed_weights`; a key of the
        question weighs 1, and a seed named several times sums its weights).
        Every chunk, mention, relation and alias comes from a document `readable` admitted: mass computed on it
        never flows through an unreadable document."""
        if not keys and not seed_chunks:
            return Subgraph()

        async def work(tx: AsyncTransaction) -> Subgraph:
            asked: set[str] = set()
            allowed: set[str] = set()

            async def admitted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
                """The rows of documents the catalogue says are readable (it is asked about new ones first)."""
                found = {row["document_id"] for row in rows}
                if found - asked:
                    allowed.update(await readable(found - asked))
                    asked.update(found)
                return [row for row in rows if row["document_id"] in allowed]

            graph = Subgraph()
            for row in await admitted(await self._run(tx, Q_ALIASES, keys=keys) if keys else []):
                graph.aliases.setdefault(row["key"], row["entity"])
            seeds = list(dict.fromkeys([*keys, *graph.aliases.values()]))
            named = set(seeds)
            weights = dict.fromkeys(seeds, 1.0)
            if seed_chunks:
                position = {uid: i for i, uid in reversed(list(enumerate(seed_chunks)))}
                rows = await admitted(await self._run(tx, Q_ENTITIES_OF_CHUNKS, uids=list(position)))
                for row in sorted(rows, key=lambda r: (position[r["uid"]], r["key"])):
                    weights[row["key"]] = weights.get(row["key"], 0.0) + passage_weight / (position[row["uid"]] + 1)
                seeds = list(weights)
            seen_chunks: set[str] = set()
            expanded: set[str] = set()
            frontier = seeds
            left_out: list[str] = []
            for hop in range(hops + 1):
                counted: dict[str, int] = {}
                documents: set[str] = set()
                for row in await admitted(await self._run(tx, Q_MENTION_COUNTS, keys=frontier)):
                    counted[row["key"]] = counted.get(row["key"], 0) + int(row["chunks"])
                    documents.add(row["document_id"])
                expanded.update(frontier)
                if hop == 0:
                    graph.seeds = [k for k in seeds if counted.get(k)]
                    graph.seed_weights = {k: weights[k] for k in graph.seeds}
                    graph.named = [k for k in graph.seeds if k in named]
                    specific = [k for k in graph.seeds if counted[k] <= hub_chunks]
                    candidates = specific or graph.seeds
                else:
                    candidates = [k for k in frontier if 0 < counted.get(k, 0) <= hub_chunks]
                graph.hubs += len([k for k in (graph.seeds if hop == 0 else frontier) if counted.get(k)]) - len(
                    candidates
                )
                chosen: list[str] = []
                budget = max_chunks - len(seen_chunks)
                for key in sorted(candidates, key=lambda k: (counted[k], k)):  # the most specific first
                    if counted[key] <= budget or (not chosen and budget > 0):
                        chosen.append(key)
                        budget -= counted[key]
                    else:
                        left_out.append(key)
                if chosen:
                    limit = max_chunks - len(seen_chunks)
                    rows = await admitted(
                        await self._run(
                            tx,
                            Q_CHUNKS_OF_ENTITIES,
                            keys=chosen,
                            document_ids=sorted(documents),
                            seen=sorted(seen_chunks),
                            limit=limit,
                        )
                    )
                    read = {row["uid"] for row in rows}
                    new_chunks = read - seen_chunks
                    seen_chunks |= new_chunks
                    for row in rows:
                        if row["uid"] in new_chunks:
                            graph.add_mention(row)
                            graph.documents.add(row["document_id"])
                    if len(read) >= limit and sum(counted[k] for k in chosen) > limit:
                        left_out.append("chunks beyond the cap")
                if hop == hops or len(seen_chunks) >= max_chunks:
                    break
                frontier = [k for k in graph.entities if k not in expanded]
                if not frontier:
                    break
            if left_out:
                graph.capped = (
                    f"subgraph capped at {max_chunks} chunks (GRAPH_PPR_MAX_CHUNKS): "
                    f"{len(left_out)} expansions left out"
                )
            if graph.entities and graph.documents and max_relations > 0:  # 0: mention edges only
                rows = await self._run(
                    tx,
                    Q_RELATIONS_AMONG,
                    keys=sorted(graph.entities),
                    document_ids=sorted(graph.documents),
                    cap=max_relations + 1,
                )
                if len(rows) > max_relations:
                    rows = rows[:max_relations]
                    graph.capped = "; ".join(
                        filter(None, [graph.capped, f"relations capped at {max_relations} (GRAPH_PPR_MAX_RELATIONS)"])
                    )
                for row in rows:
                    graph.add_relation(row)
            return graph

        return await self._transaction(work, write=False, what="neighbourhood")

    async def document_subgraph(self, document_ids: list[str]) -> Subgraph:
        """Every mention and relation of `document_ids`, which the CALLER has checked are readable (ask the
        catalogue first, `access.DocumentAccess.check`): the whole readable graph for community detection."""
        if not document_ids:
            return Subgraph()

        async def work(tx: AsyncTransaction) -> Subgraph:
            graph = Subgraph(documents=set(document_ids))
            for batch in range(0, len(document_ids), BATCH_ROWS):
                ids = document_ids[batch : batch + BATCH_ROWS]
                for row in await self._run(tx, Q_MENTIONS_OF_DOCUMENTS, document_ids=ids):
                    graph.add_mention(row)
                for row in await self._run(tx, Q_RELATIONS_OF_DOCUMENTS, document_ids=ids):
                    graph.add_relation(row)
            return graph

        return await self._transaction(work, write=False, what="document subgraph")

"""Reads of the entity graph for communities, reports and the entity API, over the store's model (store.py).

Two kinds of read, kept apart:
- `whole_graph` (the community recompute): every entity, relation weight and mention, with no access check.
  Its result is only the grouping (communities.py), never shown as such.
- `readable_view` and `entity_mentions` (a user's request): mentions and relations of the given entities in the
  documents `readable` admits (the catalogue, asked as the user), so nothing of an unreadable document is read.

These are the only places that know the store's node and edge labels besides store.py (the model is in its
docstring and the graph README): a change of the model changes the Cypher here and nothing else. A relation is
one RELATED edge per pair, predicate and document; the community graph sums them all. Key lookups are
`UNWIND $keys` + a property match, so the key index is used (an `IN` filter on the key scans every entity).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from neo4j import AsyncTransaction

from ragmesh_graph.reports import GraphView
from ragmesh_graph.store import GraphStore, Readable

Q_ALL_ENTITIES = "MATCH (e:Entity) RETURN e.key AS key"
Q_ALL_RELATIONS = "MATCH (a:Entity)-[r:RELATED]->(b:Entity) RETURN a.key AS a, b.key AS b, r.weight AS weight"
Q_ALL_MENTIONS = "MATCH (c:Chunk)-[:MENTIONS]->(e:Entity) RETURN e.key AS key, c.uid AS uid"
Q_COUNT_CHUNKS = "MATCH (c:Chunk) RETURN count(c) AS n"
Q_COUNT_ENTITIES = "MATCH (e:Entity) RETURN count(e) AS n"
Q_COUNT_RELATIONS = "MATCH (:Entity)-[r:RELATED]->(:Entity) RETURN count(r) AS n"
Q_MENTIONS_OF = """
UNWIND $keys AS k
MATCH (c:Chunk)-[:MENTIONS]->(e:Entity {key: k})
RETURN e.key AS key, e.name AS name, e.type AS type, c.uid AS uid, c.id AS chunk_id, c.document_id AS document_id
"""
Q_RELATIONS_AMONG = """
UNWIND $keys AS k
MATCH (a:Entity {key: k})-[r:RELATED]->(b:Entity)
WHERE b.key IN $keys AND r.document_id IN $document_ids
RETURN a.key AS a, b.key AS b, r.weight AS weight
"""
Q_SEARCH = """
MATCH (e:Entity) WHERE e.key CONTAINS $needle
RETURN e.key AS key
LIMIT $cap
"""
SEARCH_CAP = 500  # candidate entities a name search reads before the access check


def entity_id(key: str) -> str:
    """The entity's public id: its key, base64url without padding (a key may hold spaces, '/', '&')."""
    return base64.urlsafe_b64encode(key.encode("utf-8")).decode("ascii").rstrip("=")


def entity_key(public_id: str) -> str | None:
    """The key an id names, or None when it is not one of ours."""
    try:
        return base64.urlsafe_b64decode(public_id + "=" * (-len(public_id) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


@dataclass
class WholeGraph:
    entities: list[str]
    relations: list[tuple[str, str, float]]
    chunk_mentions: dict[str, list[str]]


@dataclass
class Mention:
    key: str
    name: str
    type: str
    uid: str
    chunk_id: str
    document_id: str


@dataclass
class ReadableMentions:
    mentions: list[Mention] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)  # the readable documents they are in


async def signature(store: GraphStore) -> str:
    """The graph's size (chunks/entities/relations): a change means an ingest or delete happened."""

    async def work(tx: AsyncTransaction) -> str:
        counts = [await GraphStore._run(tx, q) for q in (Q_COUNT_CHUNKS, Q_COUNT_ENTITIES, Q_COUNT_RELATIONS)]
        return "/".join(str(rows[0]["n"] if rows else 0) for rows in counts)

    return await store._transaction(work, write=False, what="graph signature")


async def whole_graph(store: GraphStore) -> WholeGraph:
    async def work(tx: AsyncTransaction) -> WholeGraph:
        entities = [row["key"] for row in await GraphStore._run(tx, Q_ALL_ENTITIES)]
        relations = [
            (row["a"], row["b"], float(row["weight"] or 0)) for row in await GraphStore._run(tx, Q_ALL_RELATIONS)
        ]
        mentions: dict[str, list[str]] = {}
        for row in await GraphStore._run(tx, Q_ALL_MENTIONS):
            mentions.setdefault(row["uid"], []).append(row["key"])
        return WholeGraph(entities, relations, mentions)

    return await store._transaction(work, write=False, what="community graph read")


async def entity_mentions(store: GraphStore, keys: list[str], readable: Readable) -> ReadableMentions:
    """The mentions of `keys` in documents `readable` admits (asked about exactly the documents found)."""
    if not keys:
        return ReadableMentions()

    async def work(tx: AsyncTransaction) -> list[dict[str, object]]:
        return await GraphStore._run(tx, Q_MENTIONS_OF, keys=keys)

    rows = await store._transaction(work, write=False, what="entity mentions")
    documents = {str(row["document_id"]) for row in rows}
    allowed = await readable(documents) if documents else set()
    mentions = [
        Mention(str(r["key"]), str(r["name"]), str(r["type"]), str(r["uid"]), str(r["chunk_id"]), str(r["document_id"]))
        for r in rows
        if r["document_id"] in allowed
    ]
    return ReadableMentions(mentions, sorted(allowed & documents))


async def readable_view(store: GraphStore, keys: list[str], readable: Readable) -> tuple[GraphView, ReadableMentions]:
    """The part of the graph around `keys` one user may read: names, relation weights, chunk mentions."""
    found = await entity_mentions(store, keys, readable)
    names = {m.key: m.name for m in found.mentions}
    chunk_mentions: dict[str, list[str]] = {}
    for m in found.mentions:
        chunk_mentions.setdefault(m.uid, []).append(m.key)
    weights: dict[tuple[str, str], float] = {}
    if len(names) > 1 and found.documents:
        members = sorted(names)

        async def work(tx: AsyncTransaction) -> list[dict[str, object]]:
            return await GraphStore._run(tx, Q_RELATIONS_AMONG, keys=members, document_ids=found.documents)

        for row in await store._transaction(work, write=False, what="community relations"):
            a, b = sorted((str(row["a"]), str(row["b"])))
            weights[(a, b)] = weights.get((a, b), 0.0) + float(row["weight"] or 0)  # type: ignore[arg-type]
    return GraphView(names, weights, chunk_mentions), found


async def search_keys(store: GraphStore, text: str) -> list[str]:
    """Entity keys containing `text` (normalised), at most SEARCH_CAP, before any access check."""

    async def work(tx: AsyncTransaction) -> list[str]:
        return [str(row["key"]) for row in await GraphStore._run(tx, Q_SEARCH, needle=text, cap=SEARCH_CAP)]

    return await store._transaction(work, write=False, what="entity search")

"""GraphStore transactions against the real database: a lost MERGE race is retried, then given up on."""

from __future__ import annotations

import uuid

import pytest
from neo4j import AsyncTransaction

from ragmesh_common.errors import Unavailable
from ragmesh_graph.store import GraphStore


async def _create_entity(tx: AsyncTransaction, key: str) -> None:
    await (await tx.run("CREATE (e:Entity {key: $key, name: $key, type: 'name'})", {"key": key})).consume()


async def test_constraint_error_is_retried(graph_store: GraphStore) -> None:
    key = f"retry-{uuid.uuid4().hex}"
    await graph_store._transaction(lambda tx: _create_entity(tx, key), write=True, what="seed")
    attempts = 0

    async def work(tx: AsyncTransaction) -> int:
        nonlocal attempts
        attempts += 1
        if attempts == 1:  # what a concurrent MERGE that lost the race sees: the key exists now
            await _create_entity(tx, key)
        rows = await (await tx.run("MERGE (e:Entity {key: $key}) RETURN count(e) AS n", {"key": key})).data()
        return int(rows[0]["n"])

    assert await graph_store._transaction(work, write=True, what="merge") == 1
    assert attempts == 2


async def test_retries_are_bounded(graph_store: GraphStore) -> None:
    key = f"retry-{uuid.uuid4().hex}"
    await graph_store._transaction(lambda tx: _create_entity(tx, key), write=True, what="seed")
    store = GraphStore(graph_store.driver, graph_store.database, graph_store.timeout, attempts=2)
    with pytest.raises(Unavailable, match="after 2 attempts"):
        await store._transaction(lambda tx: _create_entity(tx, key), write=True, what="duplicate")

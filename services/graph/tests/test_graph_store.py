"""GraphStore transactions against the real database: a lost MERGE race is retried, then given up on."""

from __future__ import annotations

import uuid

import pytest
from neo4j import AsyncTransaction
from neo4j.exceptions import Neo4jError

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


def _arcadedb_lock_error() -> Neo4jError:
    """What ArcadeDB's Bolt server answered to the first read after a 2.4M-row load."""
    return Neo4jError._hydrate_neo4j(
        code="Neo.DatabaseError.General.UnknownError", message="Error in execution in lock"
    )


async def test_a_lock_conflict_of_the_database_is_retried_then_unavailable(graph_store: GraphStore) -> None:
    attempts = 0

    async def read(tx: AsyncTransaction) -> int:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise _arcadedb_lock_error()
        rows = await (await tx.run("RETURN 1 AS one")).data()
        return int(rows[0]["one"])

    assert await graph_store._transaction(read, write=False, what="read") == 1
    assert attempts == 2

    async def locked(tx: AsyncTransaction) -> None:
        raise _arcadedb_lock_error()

    store = GraphStore(graph_store.driver, graph_store.database, graph_store.timeout, attempts=2)
    with pytest.raises(Unavailable, match="after 2 attempts"):  # UNAVAILABLE to the caller, not INTERNAL
        await store._transaction(locked, write=False, what="read")


async def test_other_database_errors_are_not_retried(graph_store: GraphStore) -> None:
    attempts = 0

    async def broken(tx: AsyncTransaction) -> None:
        nonlocal attempts
        attempts += 1
        raise Neo4jError._hydrate_neo4j(code="Neo.DatabaseError.General.UnknownError", message="disk full")

    with pytest.raises(Neo4jError, match="disk full"):
        await graph_store._transaction(broken, write=False, what="read")
    assert attempts == 1

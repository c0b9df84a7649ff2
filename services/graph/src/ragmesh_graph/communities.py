"""Hierarchical Leiden communities over the entity graph (igraph's Leiden), pure functions.

The graph the communities are found in has one node per entity and one weighted edge per entity pair: the
relations' weights summed over documents, plus the entities' co-mention in a chunk (each chunk that mentions
n entities adds 1/(n-1) to each of its pairs, the clique expansion of the chunk as a hyperedge, so that a long
list of names in one chunk does not outweigh a sentence that relates two). Level 0 is Leiden (igraph's
`community_leiden`: modularity with `resolution` from settings) over the whole graph; each level-0 community
with at least `min_split` members is split again by Leiden over its own subgraph (level 1), and so on for
`levels` levels. Seeded: the same graph
gives the same communities.

What is computed here is the grouping only, of every entity in the store; it holds no text. What a user sees of
a community (reports.py) is built per request from the members, relations and chunks that user can read.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations
from multiprocessing.connection import Connection
from typing import Any

import igraph

SEED = 42
MAX_CHUNK_PAIRS = 300  # co-mention pairs taken from one chunk (the most mentioned entities first)


@dataclass(frozen=True)
class Community:
    id: str  # "0.3" (level 0, the 4th largest), "1.3.0" (its largest sub-community)
    level: int
    parent: str  # "" at level 0
    members: tuple[str, ...]  # entity keys, sorted


@dataclass
class Hierarchy:
    communities: dict[str, Community] = field(default_factory=dict)
    of_entity: dict[str, list[str]] = field(default_factory=dict)  # key -> community ids, top level first

    def level(self, level: int) -> list[Community]:
        return [c for c in self.communities.values() if c.level == level]


def edge_weights(
    relations: Iterable[tuple[str, str, float]],
    chunk_mentions: Iterable[Iterable[str]],
    chunk_weight: float = 1.0,
) -> dict[tuple[str, str], float]:
    """Undirected pair weights: relation weights summed, plus `chunk_weight`/(n-1) per chunk co-mention."""
    weights: dict[tuple[str, str], float] = defaultdict(float)
    for a, b, weight in relations:
        if a != b:
            weights[(a, b) if a < b else (b, a)] += float(weight)
    if chunk_weight > 0:
        for keys in chunk_mentions:
            members = sorted(set(keys))
            if len(members) < 2:
                continue
            share = chunk_weight / (len(members) - 1)
            for count, pair in enumerate(combinations(members, 2)):
                if count >= MAX_CHUNK_PAIRS:
                    break
                weights[pair] += share
    return dict(weights)


def build_graph(nodes: Iterable[str], weights: dict[tuple[str, str], float]) -> igraph.Graph:
    """An undirected weighted igraph over `nodes` plus every node an edge names; vertex attribute `name`."""
    names = sorted(set(nodes) | {key for pair in weights for key in pair})
    index = {name: i for i, name in enumerate(names)}
    graph = igraph.Graph(n=len(names), edges=[(index[a], index[b]) for a, b in weights], directed=False)
    graph.vs["name"] = names
    graph.es["weight"] = list(weights.values())
    return graph


# Leiden iterations per partition: bounded work (each further iteration only refines a partition that is
# already good). leidenalg's Leiden (RBConfiguration, the same objective) is no longer used: its node moves
# cycled without end on some graphs whatever the iteration bound (a 23-entity, 153-edge sub-community of the
# SQuAD graph held the GIL for over 11 minutes, stop 43; the same graph with every weight ×1000, or another
# seed, took 4 ms), and igraph's own implementation partitions it in 1 ms.
ITERATIONS = 10


def _leiden(graph: igraph.Graph, resolution: float, iterations: int = ITERATIONS) -> list[list[int]]:
    """Communities of `graph` as lists of vertex indices, the largest first (ties by smallest member name).
    Seeded: igraph draws from a generator seeded with SEED for this call (then its default again)."""
    if graph.ecount() == 0:
        return [[v] for v in range(graph.vcount())]
    igraph.set_random_number_generator(random.Random(SEED))
    try:
        partition = graph.community_leiden(
            objective_function="modularity", weights="weight", resolution=resolution, n_iterations=iterations
        )
    finally:
        igraph.set_random_number_generator(random)
    groups = [list(group) for group in partition if group]
    names = graph.vs["name"]
    return sorted(groups, key=lambda g: (-len(g), min(names[v] for v in g)))


def detect(
    graph: igraph.Graph,
    *,
    resolution: float = 1.0,
    levels: int = 2,
    min_split: int = 8,
    min_size: int = 2,
    iterations: int = ITERATIONS,
) -> Hierarchy:
    """Hierarchical Leiden: level 0 over `graph`, each community of >= `min_split` members split again.

    Communities smaller than `min_size` (isolated entities, mostly) are not kept; their entities belong to none.
    """
    hierarchy = Hierarchy()
    names: list[str] = graph.vs["name"]

    def split(sub: igraph.Graph, vertices: list[int], level: int, parent: str, path: str) -> None:
        for index, group in enumerate(_leiden(sub, resolution, iterations)):
            if len(group) < min_size:
                continue
            members = [vertices[v] for v in group]
            cid = f"{level}.{path}{index}"
            community = Community(cid, level, parent, tuple(sorted(names[v] for v in members)))
            hierarchy.communities[cid] = community
            for v in members:
                hierarchy.of_entity.setdefault(names[v], []).append(cid)
            if level + 1 < levels and len(members) >= min_split:
                split(graph.induced_subgraph(members), members, level + 1, cid, f"{path}{index}.")

    split(graph, list(range(graph.vcount())), 0, "", "")
    return hierarchy


def centrality(members: Iterable[str], weights: dict[tuple[str, str], float]) -> dict[str, float]:
    """Weighted PageRank of each member over the edges among `members` (an isolated member gets the floor)."""
    nodes = sorted(set(members))
    if not nodes:
        return {}
    inside = {pair: w for pair, w in weights.items() if pair[0] in nodes and pair[1] in nodes}
    graph = build_graph(nodes, inside)
    if graph.ecount() == 0:
        return dict.fromkeys(nodes, 1.0 / len(nodes))
    ranks = graph.pagerank(weights="weight", directed=False)
    return {name: float(rank) for name, rank in zip(graph.vs["name"], ranks, strict=True)}


def _detect_child(
    connection: Connection, names: list[str], weights: dict[tuple[str, str], float], options: dict[str, Any]
) -> None:
    """`detect` in a child process (`detect_in_child`): the graph comes as `build_graph`'s inputs, the hierarchy
    goes back."""
    connection.send(detect(build_graph(names, weights), **options))
    connection.close()


async def detect_in_child(graph: igraph.Graph, *, timeout: float, **options: Any) -> Hierarchy:
    """`detect(graph, **options)` in a child process, stopped (killed) after `timeout` seconds.

    A partition runs in C for as long as it takes and holds the GIL meanwhile: in the service's own process a
    slow one starves every request, and a thread cannot be stopped. A child holds neither, and a timeout ends
    it (TimeoutError). Spawned, not forked: the service runs threads (gRPC, the event loop's workers)."""
    names: list[str] = graph.vs["name"]
    weights = {(names[a], names[b]): w for (a, b), w in zip(graph.get_edgelist(), graph.es["weight"], strict=True)}
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(
        target=_detect_child,
        args=(sender, names, weights, options),
        name="graph communities",
        daemon=True,
    )
    child.start()
    sender.close()
    try:
        if not await asyncio.to_thread(receiver.poll, timeout):
            raise TimeoutError(f"community detection ran past {timeout:.0f} s and was stopped")
        hierarchy: Hierarchy = receiver.recv()
        return hierarchy
    except EOFError as exc:
        raise RuntimeError(f"community detection ended without a result (exit code {child.exitcode})") from exc
    finally:
        if child.is_alive():
            child.kill()
        await asyncio.to_thread(child.join, 5)
        receiver.close()

"""Personalized PageRank over a readable subgraph (HippoRAG, Gutiérrez et al. 2024): chunk scores for retrieval.

The walk runs on an undirected graph of entity nodes and chunk nodes: an entity–chunk edge per mention (weight
1) and an entity–entity edge per related pair (its sentence count summed over the readable documents and
predicates, times `relation_weight`). The restart distribution is the seed entities, each weighted by its
seed weight (1 for an entity the question names; less for one of a top passage, `Subgraph.seed_weights`) times
its specificity, 1 / (number of chunks that mention it) — HippoRAG's node specificity, so a name found in one
chunk steers the walk more than one found everywhere. A chunk's score is the PageRank mass of the entities it
mentions, each divided by the number of chunks that mention it (the mass an entity passes on is shared by its
chunks; without this, every chunk naming a hub entity would score alike). networkx's `pagerank` (power
iteration on a scipy sparse matrix) computes it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import networkx as nx

from ragmesh_graph.store import Subgraph

PPR_TOLERANCE = 1e-8
PPR_MAX_ITERATIONS = 200


@dataclass(frozen=True)
class ScoredChunk:
    uid: str
    chunk_id: str
    document_id: str
    score: float


def chunk_scores(
    graph: Subgraph, *, damping: float = 0.5, relation_weight: float = 1.0
) -> tuple[list[ScoredChunk], dict[str, float]]:
    """Chunks of `graph` by the PageRank mass of their entities (best first), and each entity's mass, from
    a walk restarting at `graph.seeds` with probability 1 - `damping` per step."""
    seeds = [s for s in graph.seeds if s in graph.entities]
    if not seeds or not graph.mentions:
        return [], {}
    chunks_of: dict[str, set[str]] = defaultdict(set)
    entities_of: dict[str, set[str]] = defaultdict(set)
    where: dict[str, tuple[str, str]] = {}
    for mention in graph.mentions:
        chunks_of[mention.key].add(mention.uid)
        entities_of[mention.uid].add(mention.key)
        where[mention.uid] = (mention.chunk_id, mention.document_id)
    walk = nx.Graph()
    for uid, keys in entities_of.items():
        for key in keys:
            walk.add_edge(("e", key), ("c", uid), weight=1.0)
    if relation_weight > 0:
        pair_weight: dict[tuple[str, str], float] = defaultdict(float)
        for relation in graph.relations:
            if relation.a in chunks_of and relation.b in chunks_of:
                pair_weight[(relation.a, relation.b)] += relation.weight
        for (a, b), weight in pair_weight.items():
            walk.add_edge(("e", a), ("e", b), weight=weight * relation_weight)
    personalization = {
        ("e", s): graph.seed_weights.get(s, 1.0) / max(len(chunks_of[s]), 1) for s in seeds if ("e", s) in walk
    }
    if not personalization:
        return [], {}
    # only the seeds' components can hold mass (the power iteration would leave a vanishing remainder elsewhere)
    reachable: set[tuple[str, str]] = set()
    for node in personalization:
        if node not in reachable:
            reachable |= nx.node_connected_component(walk, node)
    walk = walk.subgraph(reachable)
    rank = nx.pagerank(
        walk,
        alpha=damping,
        personalization=personalization,
        weight="weight",
        tol=PPR_TOLERANCE,
        max_iter=PPR_MAX_ITERATIONS,
    )
    mass = {node[1]: value for node, value in rank.items() if node[0] == "e"}
    scored = [
        ScoredChunk(
            uid,
            where[uid][0],
            where[uid][1],
            sum(mass.get(key, 0.0) / len(chunks_of[key]) for key in keys),
        )
        for uid, keys in entities_of.items()
        if ("c", uid) in reachable
    ]
    scored = [c for c in scored if c.score > 0]  # not reached from any seed
    scored.sort(key=lambda c: (-c.score, c.uid))
    return scored, mass

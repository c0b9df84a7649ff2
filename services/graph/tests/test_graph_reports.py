"""Communities and reports without a database: Leiden finds planted groups, a report is built only from what
the view (one user's readable part of the graph) and the readable texts hold."""

from __future__ import annotations

import json
import multiprocessing
from itertools import combinations
from pathlib import Path

import igraph
import pytest

from ragmesh_graph import communities, reports
from ragmesh_graph.config import CommunitySettings

RIVER = ["rhine", "basel", "cologne", "lake constance", "strasbourg"]
SPACE = ["nasa", "houston", "apollo", "saturn v", "cape canaveral"]


def planted() -> dict[tuple[str, str], float]:
    weights = {pair: 3.0 for group in (RIVER, SPACE) for pair in combinations(sorted(group), 2)}
    weights[("basel", "houston")] = 0.5  # one weak bridge
    return weights


def test_leiden_finds_the_planted_groups_and_splits_hierarchically() -> None:
    graph = communities.build_graph(RIVER + SPACE + ["lonely"], planted())
    hierarchy = communities.detect(graph, resolution=1.0, levels=2, min_split=4)
    top = hierarchy.level(0)
    assert sorted(sorted(c.members) for c in top) == [sorted(SPACE), sorted(RIVER)]
    assert "lonely" not in hierarchy.of_entity  # a singleton is no community
    assert all(hierarchy.of_entity[k][0].startswith("0.") for k in RIVER + SPACE)
    again = communities.detect(graph, resolution=1.0, levels=2, min_split=4)
    assert again.communities == hierarchy.communities  # seeded: the same graph, the same communities


def test_leiden_runs_a_bounded_number_of_iterations(monkeypatch) -> None:
    """Never "until stable" (-1): that once held a core for over 12 minutes; the setting reaches every split."""
    asked: list[int] = []
    leiden = igraph.Graph.community_leiden

    def recording(self, *args, **kwargs):
        asked.append(kwargs["n_iterations"])
        return leiden(self, *args, **kwargs)

    monkeypatch.setattr(igraph.Graph, "community_leiden", recording)
    graph = communities.build_graph(RIVER + SPACE, planted())
    communities.detect(graph, resolution=1.0, levels=2, min_split=4)
    assert asked and set(asked) == {communities.ITERATIONS} and communities.ITERATIONS > 0
    asked.clear()
    bounded = communities.detect(graph, resolution=1.0, levels=2, min_split=4, iterations=3)
    assert len(asked) > 1 and set(asked) == {3}  # the top level and each split
    assert sorted(sorted(c.members) for c in bounded.level(0)) == [sorted(SPACE), sorted(RIVER)]
    assert CommunitySettings().leiden_iterations == communities.ITERATIONS


def _cycle_graph() -> igraph.Graph:
    """A 23-entity sub-community of the SQuAD graph (names replaced by numbers) on which leidenalg's node moves
    never ended (stop 43: over 11 minutes holding the GIL; 20 s here before the test was stopped)."""
    data = json.loads((Path(__file__).parent / "data" / "leiden_cycle.json").read_text())
    weights = {(f"e{a:02d}", f"e{b:02d}"): float(w) for a, b, w in data["edges"]}
    return communities.build_graph([f"e{i:02d}" for i in range(data["vertices"])], weights)


async def test_a_graph_that_made_leiden_cycle_is_partitioned() -> None:
    hierarchy = await communities.detect_in_child(_cycle_graph(), timeout=60, resolution=2.5, levels=2, min_split=8)
    assert hierarchy.level(0) and set(hierarchy.of_entity) <= {f"e{i:02d}" for i in range(23)}
    assert (
        hierarchy.communities == communities.detect(_cycle_graph(), resolution=2.5, levels=2, min_split=8).communities
    )


async def test_a_detection_past_its_timeout_is_stopped() -> None:
    graph = communities.build_graph(RIVER + SPACE, planted())
    with pytest.raises(TimeoutError, match="stopped"):
        await communities.detect_in_child(graph, timeout=0.001, resolution=1.0)
    assert not multiprocessing.active_children()  # the child was ended, not left running


def test_chunk_co_mentions_add_weight() -> None:
    weights = communities.edge_weights([("a", "b", 1.0)], [["a", "b", "c"]], chunk_weight=2.0)
    assert weights == {("a", "b"): 2.0, ("a", "c"): 1.0, ("b", "c"): 1.0}


def test_a_report_holds_only_readable_members_and_sentences() -> None:
    settings = CommunitySettings()
    graph = communities.build_graph(RIVER + SPACE, planted())
    hierarchy = communities.detect(graph, resolution=1.0, levels=1)
    # the user reads d1 (rhine, basel, cologne) only; d2 (strasbourg, lake constance) is someone else's
    view = reports.GraphView(
        names={"rhine": "Rhine", "basel": "Basel", "cologne": "Cologne"},
        weights={("basel", "rhine"): 3.0, ("cologne", "rhine"): 3.0},
        chunk_mentions={"d1/c0": ["rhine", "basel"], "d1/c1": ["rhine", "cologne"]},
    )
    texts = {
        "d1/c0": reports.ChunkText("d1", "c0", "The Rhine flows past Basel. Nothing here."),
        "d1/c1": reports.ChunkText("d1", "c1", "Cologne lies on the Rhine."),
    }
    chosen = reports.relevant_communities(
        hierarchy, view, ["rhine"], "Summarise what we know about the Rhine", settings
    )
    assert [c.members for c, _ in chosen] == [tuple(sorted(RIVER))]
    plans = reports.plan_reports(chosen, view, settings)
    assert plans[0].members == ["basel", "cologne", "rhine"]  # strasbourg, lake constance: not readable
    (built,) = reports.build_reports(plans, texts, view.names, settings)
    assert built.title.startswith("Rhine")  # the most central readable member
    assert {e[1] for e in built.entities} == {"Rhine", "Basel", "Cologne"}
    assert {s.text for s in built.sentences} == {"The Rhine flows past Basel.", "Cologne lies on the Rhine."}
    mapped = reports.map_report("What do we know about Cologne?", built, keep=2)
    assert mapped[0].text == "Cologne lies on the Rhine."  # the map step prefers the question's words
    assert {(s.document_id, s.chunk_id) for s in mapped} == {("d1", "c0"), ("d1", "c1")}


def test_a_question_naming_nothing_readable_gets_the_largest_readable_communities() -> None:
    settings = CommunitySettings()
    hierarchy = communities.detect(communities.build_graph(RIVER + SPACE, planted()), resolution=1.0, levels=1)
    view = reports.GraphView(names={"nasa": "NASA", "apollo": "Apollo"}, weights={}, chunk_mentions={})
    chosen = reports.relevant_communities(
        hierarchy, view, ["rhine"], "What are the main themes in my documents?", settings
    )
    assert [c.members for c, _ in chosen] == [tuple(sorted(SPACE))]  # the river community has no readable member


def test_the_words_that_ask_for_themes_are_not_entities_of_the_question() -> None:
    """ "the main themes … about NASA": "main" is the river Main's key too, but it asks, it names nothing."""
    settings = CommunitySettings()
    river = [*RIVER, "main"]
    weights = {**planted(), **{(k, "main") if k < "main" else ("main", k): 3.0 for k in RIVER}}
    hierarchy = communities.detect(communities.build_graph(river + SPACE, weights), resolution=1.0, levels=1)
    view = reports.GraphView(names={k: k.title() for k in river + SPACE}, weights={}, chunk_mentions={})
    question = "What are the main themes in my documents about NASA?"
    chosen = reports.relevant_communities(hierarchy, view, ["main", "themes", "nasa"], question, settings)
    assert [c.members for c, _ in chosen] == [tuple(sorted(SPACE))]
    keys = ["main", "main themes", "nasa", "key", "rhine"]
    assert reports.topic_keys(keys, question) == ["main themes", "nasa", "rhine"]
    # a question that names the Main (capitalised) as its topic still finds it
    chosen = reports.relevant_communities(
        hierarchy, view, ["the main", "main"], "What do my documents say about the Main?", settings
    )
    assert chosen and all("main" in c.members for c, _ in chosen)

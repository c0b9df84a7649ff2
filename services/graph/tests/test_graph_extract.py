"""The rule-based (fallback) extractor: what it finds, what it skips, and the relations it draws."""

from __future__ import annotations

from ragmesh_graph.extract import (
    PREDICATE_COOCCURS,
    TYPE_ACRONYM,
    TYPE_NAME,
    TYPE_TERM,
    build_document_graph,
    extract_document,
    normalise,
)
from ragmesh_graph.extract import RuleExtractor as EntityExtractor


def names(text: str, limit: int = 25) -> dict[str, str]:
    return {e.name: e.type for e in EntityExtractor(limit).extract(text).entities}


def test_finds_phrases_acronyms_camelcase_and_quoted_terms() -> None:
    found = names('The Acme Corp team shipped WidgetPro to NASA using the "quantum flux" method.')
    assert found == {"Acme Corp": TYPE_NAME, "WidgetPro": TYPE_NAME, "NASA": TYPE_ACRONYM, "quantum flux": TYPE_TERM}


def test_sentence_initial_stopwords_are_not_part_of_names() -> None:
    found = names("The European Space Agency met in Paris. In Houston they met again. This was useful.")
    assert found == {"European Space Agency": TYPE_NAME, "Paris": TYPE_NAME, "Houston": TYPE_NAME}


def test_a_sentence_starting_capital_alone_is_not_an_entity() -> None:
    assert names("However the results improved. Results were good.") == {}


def test_connectors_join_names_but_and_separates_them() -> None:
    found = names("Revenue at Bank of America and Acme Corp grew.")
    assert set(found) == {"Bank of America", "Acme Corp"}


def test_acronym_plural_and_possessive_are_normalised() -> None:
    extractor = EntityExtractor()
    keys = {e.key for e in extractor.extract("Acme Corp's APIs beat the old API from IBM.").entities}
    assert keys == {"acme corp", "api", "ibm"}


def test_entities_are_deduplicated_by_key() -> None:
    entities = EntityExtractor().extract("Acme Corp grew. Later ACME CORP and Acme  Corp merged.").entities
    assert [e.key for e in entities].count("acme corp") == 1


def test_relations_are_sentence_cooccurrences_counted() -> None:
    found = EntityExtractor().extract("NASA hired Acme Corp. NASA paid Acme Corp. Then IBM joined.")
    assert found.pairs == {("acme corp", "nasa"): 2}


def test_max_entities_per_chunk_keeps_the_most_frequent() -> None:
    text = "NASA met IBM. NASA met ESA. NASA met CERN."
    kept = {e.key for e in EntityExtractor(max_entities_per_chunk=2).extract(text).entities}
    assert kept == {"nasa", "ibm"}


def test_query_keys_match_lower_cased_names() -> None:
    keys = EntityExtractor().query_keys("what does nasa build with acme corp?")
    assert "nasa" in keys and "acme corp" in keys
    assert "what" not in keys and "with" not in keys


def test_normalise() -> None:
    assert normalise("  Acme   Corp’s ") == "acme corp"
    assert normalise("AT&T") == "at&t"
    assert normalise("Alû") == normalise("ALU") == "alu"
    assert normalise("The Beatles'") == "beatles"


def test_document_graph_aggregates_weights_and_chunks() -> None:
    graph = build_document_graph(
        extract_document(
            EntityExtractor(),
            "d",
            [("d:0", "NASA and IBM met."), ("d:1", "NASA and IBM again."), ("d:2", "Nothing here.")],
        )
    )
    assert graph.chunk_ids == ["d:0", "d:1", "d:2"]
    assert set(graph.entities) == {"nasa", "ibm"}
    stats = graph.relations[("ibm", "nasa", PREDICATE_COOCCURS)]
    assert stats.weight == 2 and stats.chunk_ids == ["d:0", "d:1"]

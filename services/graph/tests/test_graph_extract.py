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
    topic_name,
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


def test_a_title_that_reads_as_a_name_is_the_topic_of_every_chunk() -> None:
    extracted = extract_document(
        EntityExtractor(),
        "d",
        [("d:0", "It was founded in 1901."), ("d:1", "Acme Corp trains nurses there.")],
        title="Velmora Institute (school)",
    )
    graph = build_document_graph(extracted)
    assert graph.entities["velmora institute"].name == "Velmora Institute"
    assert ("velmora institute", "d:0") in graph.mentions and ("velmora institute", "d:1") in graph.mentions
    assert graph.surfaces[("velmora institute", "d:0")] == {"Velmora Institute"}
    # mentions only: the topic relates to nothing a sentence did not relate it to
    assert all("velmora institute" not in (a, b) for a, b, _ in graph.relations)
    untitled = build_document_graph(extract_document(EntityExtractor(), "d", [("d:0", "It was founded in 1901.")]))
    assert not untitled.entities


def test_a_topic_already_named_in_a_chunk_is_one_mention_with_both_surfaces() -> None:
    extracted = extract_document(EntityExtractor(), "d", [("d:0", "The ACME Corp. story.")], title="Acme Corp")
    graph = build_document_graph(extracted)
    assert [key for key, _ in graph.mentions] == ["acme corp"]
    assert graph.surfaces[("acme corp", "d:0")] == {"ACME Corp", "Acme Corp"}


def test_topic_names_of_titles() -> None:
    assert topic_name("Kiss and Tell (1945 film)") == "Kiss and Tell"
    assert topic_name("Travel_Policy.pdf") == "Travel Policy"
    assert topic_name("  Quarterly   report 2023.DOCX ") == "Quarterly report 2023"
    assert topic_name("Shirley Temple") == "Shirley Temple"
    assert topic_name("Émile Zola") == "Émile Zola"
    # not a name: nothing left, no capitalised word (a file name), or longer than a question is matched on
    assert topic_name("") == topic_name("(draft)") == topic_name("1999") == topic_name("2023-01-05.pdf") == ""
    assert topic_name("scan_0001.pdf") == topic_name("final_v2") == topic_name("IMG_2041.jpg") == ""
    assert topic_name("shared") == topic_name("README") == ""
    assert topic_name("Minutes of the meeting of the board held in March") == ""

"""The one entity spotter in its two modes: what questions and documents read differently, and what they share."""

from __future__ import annotations

from ragmesh_common.text.entities import KIND_ACRONYM, KIND_NAME, KIND_QUOTED, extract_entities, spot


def texts(text: str, *, for_question: bool) -> list[str]:
    return [m.text for m in spot(text, for_question=for_question)]


def test_a_possessive_ends_a_name_in_documents_but_not_before_a_capitalised_word_in_questions() -> None:
    assert texts("We met Acme Corp's APIs team.", for_question=False) == ["Acme Corp", "API"]
    assert texts("We met Acme Corp's APIs team.", for_question=True) == ["Acme Corp's APIs"]


def test_a_mid_sentence_stop_word_starts_a_question_name_but_is_trimmed_in_documents() -> None:
    assert extract_entities("Which band came first The Exies or Circus Diablo?") == ["The Exies", "Circus Diablo"]
    assert texts("Which band came first The Exies or Circus Diablo?", for_question=False) == ["Exies", "Circus Diablo"]


def test_numbers_and_years_are_question_entities_only() -> None:
    assert extract_entities("Acme Corp grew 25% in 2005") == ["Acme Corp", "25%", "2005"]
    assert texts("Acme Corp grew 25% in 2005", for_question=False) == ["Acme Corp"]


def test_both_modes_share_kinds_quoting_and_any_script() -> None:
    found = spot('The "quantum flux" of NASA met Melchior Wańkowicz.', for_question=False)
    assert [(m.text, m.kind) for m in found] == [
        ("quantum flux", KIND_QUOTED),
        ("NASA", KIND_ACRONYM),
        ("Melchior Wańkowicz", KIND_NAME),
    ]
    assert extract_entities('The "quantum flux" of NASA met Melchior Wańkowicz.') == [
        "quantum flux",
        "NASA",
        "Melchior Wańkowicz",
    ]

"""Evidence selection: the sentences that answer the question, as exact substrings with offsets."""

from __future__ import annotations

from ragmesh_answerer.evidence import select_evidence
from ragmesh_answerer.prompting import Source, build_prompt
from ragmesh_common.text.sentences import sentence_spans

IBM = Source(
    "ibm-1",
    "IBM",
    ("History",),
    "History\nIBM was founded in 1911 in Endicott, New York. It was first called the "
    "Computing-Tabulating-Recording Company. The company adopted the name IBM in 1924. "
    "Its headquarters are in Armonk.",
)
LEAVE = Source(
    "hb-3",
    "Employee Handbook",
    ("Leave",),
    "Full-time employees receive 25 days of paid vacation per calendar year. "
    "Unused days can be carried over until March 31, e.g. for long trips.",
)
OTHER = Source("x-9", "Cafeteria", (), "The cafeteria serves lasagna on Fridays. It opens at 11:30.")


def test_sentence_spans_keep_offsets_and_skip_abbreviations() -> None:
    text = "Dr. Smith joined in 2001. He left, e.g. for Acme.\nNew line here"
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "Dr. Smith joined in 2001.",
        "He left, e.g. for Acme.",
        "New line here",
    ]


def test_quotes_are_exact_substrings_best_first() -> None:
    quotes = select_evidence("When was IBM founded?", [OTHER, IBM], max_quotes=5)
    assert quotes, "nothing selected"
    for quote in quotes:
        source = [OTHER, IBM][quote.source_index]
        assert source.text[quote.start : quote.end] == quote.text
        assert quote.chunk_id == source.chunk_id
    assert quotes[0].source_index == 1 and quotes[0].text.startswith("IBM was founded in 1911")
    assert all(q.source_index == 1 for q in quotes)  # the cafeteria shares no key term
    assert all(q.text != "History" for q in quotes)  # headings are not quoted


def test_pronoun_sentence_brings_its_antecedent() -> None:
    quotes = select_evidence("Where are the headquarters of IBM?", [IBM], max_quotes=1)
    [quote] = quotes
    assert quote.text == "The company adopted the name IBM in 1924. Its headquarters are in Armonk."
    assert IBM.text[quote.start : quote.end] == quote.text


def test_higher_ranked_source_wins_ties() -> None:
    copy = Source("hb-4", "Employee Handbook", ("Leave",), LEAVE.text)
    quotes = select_evidence("How many days of paid vacation do employees get?", [LEAVE, copy], max_quotes=1)
    assert [q.chunk_id for q in quotes] == ["hb-3"]


def test_a_sentence_two_sources_share_is_quoted_once() -> None:
    """A copy of a document in another format (duck.md and word_sample.docx) showed the same quote twice in
    "what the documents say"; the freed place goes to the next sentence. Numbers tell sentences apart."""
    copy = Source("hb-4", "Employee Handbook (docx)", ("Leave",), LEAVE.text.replace("  ", " ").upper())
    question = "How many days of paid vacation do employees get, and until when can unused days be carried over?"
    quotes = select_evidence(question, [LEAVE, copy], max_quotes=2)
    assert [(q.chunk_id, q.text[:9]) for q in quotes] == [("hb-3", "Full-time"), ("hb-3", "Unused da")]
    later = Source("hb-5", "Employee Handbook 2027", ("Leave",), LEAVE.text.replace("25 days", "28 days"))
    quotes = select_evidence("How many days of paid vacation do employees get?", [LEAVE, later], max_quotes=2)
    assert {q.chunk_id for q in quotes} == {"hb-3", "hb-5"}


def test_at_most_max_quotes_and_the_budget() -> None:
    assert len(select_evidence("IBM name company headquarters founded", [IBM], max_quotes=2)) <= 2
    quotes = select_evidence("IBM name company headquarters founded", [IBM], max_quotes=5, max_chars=60)
    assert len(quotes) == 1


def test_no_key_term_falls_back_to_the_top_source_opening() -> None:
    [quote] = select_evidence("What is the capital of Mongolia?", [LEAVE, OTHER], max_quotes=5)
    assert quote.source_index == 0 and quote.start == 0


def test_a_quote_that_ends_with_a_colon_brings_the_lines_it_announces() -> None:
    """Found asking word_sample.docx "What should you not forget when swimming?": the unverified answer quoted
    "Also, don't forget:" and not one item of the list under it."""
    text = "Let's swim in the lake.\nAlso, don't forget:\nWear sunglasses\nDrink water\nUse sun cream\nThat is all."
    swim = Source("doc-1", "Summer", (), text)
    quote = next(
        q for q in select_evidence("What should you not forget when swimming?", [swim], 3) if "forget" in q.text
    )
    assert quote.text == "Also, don't forget:\nWear sunglasses\nDrink water\nUse sun cream\nThat is all."
    assert text[quote.start : quote.end] == quote.text
    long_line = (
        "Also, don't forget:\n" + "Every line here is a sentence of its own and far longer than any list item is."
    )
    [alone] = select_evidence("What should you not forget?", [Source("doc-2", "Summer", (), long_line)], 3)
    assert alone.text == "Also, don't forget:"


def test_a_text_of_short_lines_is_still_quoted() -> None:
    """Found asking about Transitional.docx (its text: "Some text"): "What they say" was followed by nothing."""
    [quote] = select_evidence(
        "What is in the Transitional document?", [Source("d", "Transitional", (), "Some text")], 3
    )
    assert quote.text == "Some text"


def test_prompt_numbers_the_quotes_and_ends_with_the_question() -> None:
    messages = build_prompt("When was IBM founded?", ["IBM was founded in 1911."], [("user", "Hi")], history_turns=4)
    assert messages[0]["role"] == "system" and messages[-2] == {"role": "user", "content": "Hi"}
    assert messages[-1]["content"] == "Quotes:\n[1] IBM was founded in 1911.\n\nQuestion: When was IBM founded?"

"""The span reader (MiniLM with its fitted adapter, merged at load): which span of the sources answers the question,
and how `relation` weighs it with the learned ranking."""

from __future__ import annotations

import pytest

from ragmesh_answerer import relation
from ragmesh_answerer.config import Settings
from ragmesh_answerer.relation import Reader, load_model
from ragmesh_answerer.span_reader import ADAPTER, Reading, SpanReader, Window
from ragmesh_common.text.questions import Question

IBM = (
    "IBM was founded in 1911 in Endicott, New York, by Charles Flint. It was renamed International Business "
    "Machines in 1924. IBM has 288,000 employees."
)
WEATHER = "The weather in the valley was mild that spring, with rain in April."


@pytest.fixture(scope="module")
def spans() -> SpanReader:
    return SpanReader.load()


@pytest.fixture(scope="module")
def reader() -> Reader:
    return Reader(load_model(Settings.defaults("http://unused").spacy_model))


def score(spans: SpanReader, question: str, answer: str, text: str = IBM) -> float:
    reading = spans.read(question, [WEATHER, text])
    start = text.index(answer)
    value = reading.score(1, start, start + len(answer))
    assert value is not None
    return value


def test_the_adapter_ships_with_the_package_and_is_small() -> None:
    assert ADAPTER.is_file()
    assert ADAPTER.stat().st_size < 4_000_000  # an adapter and a head, not a copy of the model


def test_the_reader_prefers_the_span_that_answers(spans: SpanReader) -> None:
    assert score(spans, "When was IBM founded?", "1911") > score(spans, "When was IBM founded?", "288,000")
    assert score(spans, "Who founded IBM?", "Charles Flint") > score(spans, "Who founded IBM?", "1911")
    assert score(spans, "How many employees does IBM have?", "288,000") > score(
        spans, "How many employees does IBM have?", "Charles Flint"
    )


def test_a_score_is_the_best_over_the_windows_of_a_long_source(spans: SpanReader) -> None:
    filler = " ".join(f"Sentence number {n} says nothing about the company." for n in range(60))
    text = f"{filler} {IBM}"  # the answer is past the first window's 320 tokens
    reading = spans.read("Who founded IBM?", [text])
    assert len(reading.windows[0]) > 1
    start = text.index("Charles Flint")
    flint = reading.score(0, start, start + len("Charles Flint"))
    assert flint is not None and flint == reading.best
    assert reading.score(5, 0, 4) is None  # a source that was not read


def test_the_best_span_is_the_best_start_and_end_and_where_it_is() -> None:
    offsets = [(0, 4), (5, 10), (11, 17), (18, 22)]
    window = Window(offsets=offsets, first=1, start=[9.0, 0.0, 3.0, 1.0, 0.0], end=[9.0, 0.0, 0.0, 2.0, 5.0], null=1.0)
    reading = Reading(windows={2: [window]})
    score, source, start, end = reading.best_span
    # the [CLS] logits (index 0) are no span; the start at token 1 (3.0) with the end at token 3 (5.0), minus null
    assert (score, source, start, end) == (7.0, 2, 5, 22) and reading.best == 7.0
    assert Reading(windows={}).best_span is None and Reading(windows={}).best == -1e9


def test_extract_weighs_the_reading_and_can_be_switched_off(spans: SpanReader, reader: Reader) -> None:
    question = Question.parse("Who founded IBM?")
    sentences = reader.sentences([(IBM, "IBM")])
    reading = spans.read(question.text, [IBM])
    ranked = reader.ranked(question, sentences, reading)
    assert ranked[0].text == "Charles Flint"
    assert all(s.reading >= relation.READING_FLOOR for s in ranked)
    assert ranked[0].reading == max(s.reading for s in ranked)
    found = reader.extract(question, sentences, reading)
    assert found is not None and found.text == "Charles Flint"
    # without a reading (the reader off or failed) the learned ranking decides alone: no reading scores
    assert all(s.reading == 0.0 for s in reader.ranked(question, sentences))


CELLS = "Neutrophils and macrophages are the first cells to arrive at a site of infection."


def test_an_answer_coordinated_with_others_is_given_with_them_when_the_reader_reads_them_together(
    spans: SpanReader, reader: Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    question = Question.parse("Which cells arrive first at an infection?")
    sentences = reader.sentences([(CELLS, "Immune system")])
    reading = spans.read(question.text, [CELLS])
    found = reader.extract(question, sentences, reading)
    assert found is not None and found.text == "Neutrophils and macrophages"
    assert CELLS[found.source_start : found.source_end] == found.text  # still an exact slice, with its offsets
    monkeypatch.setattr(relation, "COORDINATION_GAIN", None)  # off: the candidate alone
    monkeypatch.setattr(relation, "WIDEN_GAIN", None)  # (the reader's own bounds would join them as well)
    alone = reader.extract(question, sentences, reading)
    assert alone is not None and alone.text == "Neutrophils"
    monkeypatch.setattr(relation, "COORDINATION_GAIN", 50.0)  # the reader must prefer the coordination
    assert reader.extract(question, sentences, reading).text == "Neutrophils"  # type: ignore[union-attr]


def test_a_coordination_that_names_what_the_question_asks_about_is_not_the_answer(
    spans: SpanReader, reader: Reader
) -> None:
    text = "The CombinedTabnet dataset is the processed combination of PubTabNet and Fintabnet."
    sentences = reader.sentences([(text, "Datasets")])
    for asked, member in (("What is FinTabNet?", "Fintabnet"), ("What is PubTabNet?", "PubTabNet")):
        question = Question.parse(asked)
        found = reader.extract(question, sentences, spans.read(asked, [text]))
        assert found is None or member not in found.text  # "PubTabNet and Fintabnet" names FinTabNet itself


def test_a_coordination_is_the_members_joined_by_and_or_or_within_the_word_bound(
    reader: Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    def joined(text: str, member: str) -> str | None:
        doc = reader._parse([text])[0]
        found = relation._coordination(doc, text.index(member), text.index(member) + len(member))
        return text[found[0] : found[1]] if found else None

    assert joined("The midwives Shiphrah and Puah refused.", "Puah") == "Shiphrah and Puah"
    assert joined("It is led by ministers or party leaders.", "party leaders") == "ministers or party leaders"
    assert joined("It was founded in 1911 by Charles Flint.", "Charles Flint") is None  # nothing coordinated
    cities = "Paris, Rome, Madrid, Lisbon, Berlin, Vienna, Prague, Warsaw, Oslo, Dublin, Athens, Sofia and Riga"
    assert joined(f"The tour visited {cities} in May.", "Riga") is None  # longer than MAX_SPAN_WORDS
    monkeypatch.setattr(relation, "MAX_SPAN_WORDS", 40)
    assert joined(f"The tour visited {cities} in May.", "Riga") == cities


def test_the_reading_moves_the_order_and_the_decision(
    spans: SpanReader, reader: Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "IBM was founded in 1911 in Endicott, New York, as the Computing-Tabulating-Recording Company."
    question = Question.parse("In which city was IBM founded?")
    sentences = reader.sentences([(text, "IBM history")])
    reading = spans.read(question.text, [text])
    # the learned ranking alone is not confident enough to answer; with the reading it answers the city
    assert reader.extract(question, sentences) is None
    found = reader.extract(question, sentences, reading)
    assert found is not None and found.text == "Endicott, New York"  # the city with its state: the reader's bounds
    # the order follows the reading as its weight grows
    monkeypatch.setattr(relation, "READING_WEIGHT", 100.0)
    ranked = reader.ranked(question, sentences, reading)
    assert [s.reading for s in ranked] == sorted((s.reading for s in ranked), reverse=True)
    assert reader.weighs_reading(question)
    assert not reader.weighs_reading(Question.parse("Did Tesla die in 1943?"))  # yes or no
    assert not reader.weighs_reading(Question.parse("Which was founded first, IBM or Kodak?"))


def test_check_compares_a_given_answer_with_the_best_span_by_reading_too(
    spans: SpanReader, reader: Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    question = Question.parse("When was IBM founded?")
    sentences = reader.sentences([(IBM, "IBM")])
    reading = spans.read(question.text, [IBM])
    assert reader.check(question, "1911", sentences, reading).accepted
    best = reader.ranked(question, sentences, reading)[0]
    assert best.text == "1911"
    monkeypatch.setattr(relation, "READING_CHECK_MARGIN", 2.0)
    refused = reader.check(question, "1924", sentences, reading)  # stated, but as when IBM was renamed
    assert not refused.accepted and '"1911"' in refused.reason
    monkeypatch.setattr(relation, "READING_CHECK_MARGIN", 50.0)  # a margin that wide accepts any span of the type
    assert reader.check(question, "1924", sentences, reading).accepted
    monkeypatch.setattr(relation, "READING_CHECK", False)  # off: the hand-set check, as without a reading
    assert not reader.check(question, "1924", sentences, reading).accepted


def test_check_accepts_what_the_reader_reads_best_where_no_sentence_covers_the_question(
    spans: SpanReader, reader: Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    question = Question.parse("How many people work there?")  # no word of IBM's sentences but "there"
    sentences = reader.sentences([(IBM, "IBM")])
    reading = spans.read(question.text, [IBM])
    assert reader.check(question, "288,000", sentences, reading).accepted
    assert not reader.check(question, "1911", sentences, reading).accepted  # not what the reader reads
    assert not reader.check(question, "288,000", sentences).accepted  # without the reader: nothing covers it
    monkeypatch.setattr(relation, "READING_RESCUE_MIN", 1e9)  # the rule off
    refused = reader.check(question, "288,000", sentences, reading)
    assert not refused.accepted and refused.reason == "no evidence sentence is about the question"


def test_no_sources_and_a_very_long_question_are_read_without_error(spans: SpanReader) -> None:
    assert spans.read("Who founded IBM?", []).windows == {}
    long_question = "Who founded IBM? " + "Please answer with care and precision. " * 80  # far over a window
    reading = spans.read(long_question, [IBM])
    start = IBM.index("Charles Flint")
    assert reading.score(0, start, start + len("Charles Flint")) is not None


def test_the_reader_sets_where_an_answer_begins_and_ends(
    spans: SpanReader, reader: Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parse proposes "15 thousand" of "12 to 15 thousand", "fiber lock type" of "the all-metal type and the
    fiber lock type", "about 40" without its unit; the reader's start and end logits widen it within its sentence
    (`Reader._widened`), never by a word of the question."""
    cases = [
        (
            "How many people moved to the valley?",
            "Over the decade the farms drew 12 to 15 thousand people to the valley, most of them from the coast.",
            "15 thousand",
            "12 to 15 thousand",
        ),
        (
            "What are the two general types of self-locking nuts?",
            "The two general types of self-locking nuts currently in use are the all-metal type and the fiber lock type.",
            "fiber lock type",
            "all-metal type and the fiber lock type",
        ),
        (
            "How big are the granules?",
            "The granules organize into relatively large complexes about 40 nanometers across called bodies.",
            "about 40",
            "about 40 nanometers",
        ),
    ]
    for asked, text, alone, widened in cases:
        question, sentences = Question.parse(asked), reader.sentences([(text, "Notes")])
        reading = spans.read(asked, [text])
        monkeypatch.setattr(relation, "WIDEN_GAIN", None)  # off: the parse's span
        found = reader.extract(question, sentences, reading)
        assert found is not None and found.text == alone, asked
        monkeypatch.setattr(relation, "WIDEN_GAIN", 0.0)
        found = reader.extract(question, sentences, reading)
        assert found is not None and found.text == widened, asked
        assert text[found.source_start : found.source_end] == widened  # an exact slice, with its offsets
        assert not found.text.lower().count("valley") and "nuts" not in found.text  # no word of the question


def test_a_widened_answer_takes_no_bullet_glyph(
    spans: SpanReader, reader: Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PDF's bullet drawn as a glyph before a list item ("∞ Wang Laboratories : In the 1970s, …") was taken into
    the widened answer ("∞ Wang Laboratories"): a word without a letter or digit is never added."""
    text = (
        "∞ Wang Laboratories : In the 1970s, Wang introduced dedicated word processing machines. These devices, "
        "like the Wang 1200, featured small screens and floppy disks, making them revolutionary for their time."
    )
    asked = "Which company introduced the Wang 1200?"
    question, sentences, reading = Question.parse(asked), reader.sentences([(text, "Notes")]), spans.read(asked, [text])
    found = reader.extract(question, sentences, reading)
    assert found is not None and found.text == "Wang Laboratories"
    monkeypatch.setattr(relation, "_no_word", lambda text, bounds: False)  # without the rule
    found = reader.extract(question, sentences, reading)
    assert found is not None and found.text == "∞ Wang Laboratories"

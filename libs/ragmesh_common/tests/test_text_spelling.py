"""A question's slips read as the sources spell them (`ragmesh_common.text.spelling`)."""

from __future__ import annotations

from ragmesh_common.text.spelling import respelled

SOURCES = [
    "IBM was founded in 1911 in Endicott. Denver's defense had 109 tackles. This measurement is taken from sea "
    "level. Members receive the government grant.",
    "The coastal survey found tidal flats.",
]


def test_a_slip_is_read_as_the_word_the_sources_write() -> None:
    assert respelled("When was IBM fonded?", SOURCES) == ("When was IBM founded?", [("fonded", "founded")])
    assert respelled("Who had 109 tackels?", SOURCES)[0] == "Who had 109 tackles?"  # two letters swapped
    assert respelled("Where was the measurment taken?", SOURCES)[1] == [("measurment", "measurement")]
    text, read_as = respelled("Do members recieve the goverment grant?", SOURCES)
    assert text == "Do members receive the government grant?"
    assert read_as == [("recieve", "receive"), ("goverment", "government")]


def test_what_is_not_a_slip_stays_as_written() -> None:
    for question in (
        "When was IBM founded?",  # written as the sources write it
        "When was the founding?",  # a word of the family the sources write
        "When was IBM Fonded?",  # written as a name: names are matched exactly
        "When was IBN founded?",  # too short, and a name
        "Who defunded Endicott?",  # two edits from anything the sources write
        "When was IBM fondled?",  # "fondled" is a word of its own, not rarer than "founded" by much
    ):
        assert respelled(question, SOURCES) == (question, []), question
    assert respelled("When was IBM fonded?", []) == ("When was IBM fonded?", [])  # no sources, nothing to read by


def test_an_english_word_is_never_a_slip() -> None:
    """Found on SQuAD: "What percentage of Newcastle's population was culled by the plague?" was read with the
    sources' "called". A word WordNet knows is the user's word, however rare beside the sources' one."""
    plague = ["The plague killed 47% of the population. The town was called Newcastle."]
    question = "What percentage of Newcastle's population was culled by the plague?"
    assert respelled(question, plague) == (question, [])
    assert respelled("What did the costal survey find?", SOURCES)[1] == []  # "costal" (of the ribs), not "coastal"
    ribs = ["The costal cartilage joins the ribs."]
    assert respelled("What did the coastal survey find?", ribs) == ("What did the coastal survey find?", [])


def test_a_slip_of_two_words_of_the_sources_is_left_alone() -> None:
    sources = ["The tiles were laid.", "The tides were high."]
    assert respelled("When were the tidles measured?", sources) == ("When were the tidles measured?", [])


def test_only_the_sources_words_are_candidates() -> None:
    """What the user may read decides: a word only an unreadable document writes is never offered."""
    assert respelled("When was IBM fonded?", ["IBM was started in 1911."]) == ("When was IBM fonded?", [])

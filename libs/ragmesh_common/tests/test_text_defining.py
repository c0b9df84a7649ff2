"""What a question asks the definition of, and whether a text says what that is (ragmesh_common.text.defining)."""

from __future__ import annotations

import pytest

from ragmesh_common.text.defining import asked_term, defines


@pytest.mark.parametrize(
    ("question", "term"),
    [
        ("What is TableFormer?", "TableFormer"),
        ("what's the net retention rate", "net retention rate"),
        ("Who was Ada Brill?", "Ada Brill"),
        ("What does OTSL stand for?", "OTSL"),
        ("What does  idempotent mean?", "idempotent"),
        ("Define a chartsheet.", "chartsheet"),
        ("When was IBM founded?", None),  # another kind of question
        ("What is the name of the largest university press in the United States of America?", None),  # too long
        ("Which items are in the list?", None),
        ("What is HTML used for?", None),  # a stranded preposition: what it is for, not what it is
        ("What is the capital of France?", "capital of France"),
    ],
)
def test_the_asked_term(question: str, term: str | None) -> None:
    assert asked_term(question) == term


@pytest.mark.parametrize(
    ("term", "text", "says"),
    [
        ("TableFormer", "We propose TableFormer , a transformer based model that predicts tables structure.", True),
        ("TableFormer", "TableFormer is a model for table structure.", True),
        ("TableFormer", "tableformer was the first such model.", True),  # any case
        ("OTSL", "OTSL (Optimised Table Structure Language) is a new representation.", True),
        ("OTSL", "Here OTSL stands for Optimised Table Structure Language.", True),
        ("TableFormer", "Given the image of a table, TableFormer is able to predict its structure.", False),
        ("TableFormer", "TableFormerV2 is a later model.", False),  # another word
        ("TableFormer", "Across all datasets TableFormer outperforms existing methods.", False),
        ("OTSL", "", False),
        ("OTSL", "We propose here our Optimised Table Structure Language (OTSL).", True),  # written out
        ("duck", "Duck is the common name for numerous species of waterfowl.", True),
        ("duck", "Trapping works. The call duck is the smallest domestic duck breed.", False),  # a call duck
        ("duck", "In Europe a duck is a bird of the family Anatidae.", True),
        ("DocLayNet", "While this also applies to DocLayNet, the difference is far less pronounced.", False),
        ("DocLayNet", "Lists in PubLayNet versus DocLayNet (separate list-items), the label set of size 4.", False),
        ("DocLayNet", "In this paper, we present DocLayNet , a new, publicly available, dataset.", True),
        # a glossary's entry opening a line: a description list's term as the parser writes it, a dashed line
        ("CSS", "HTML: HyperText Markup Language\nCSS: Cascading Style Sheets; Used for styling", True),
        ("SLA", "Terms\n- SLA – Service Level Agreement", True),
        ("CSS", "We style pages with CSS: it is the standard.", False),  # not opening its line
        ("CSS", "CSS:Cascading", False),  # no space: a code, a time, a URL
    ],
)
def test_a_text_says_what_the_term_is(term: str, text: str, says: bool) -> None:
    assert defines(term, text) is says

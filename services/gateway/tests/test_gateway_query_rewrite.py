"""Follow-up rewriting: rules resolve pronouns and ellipsis, skip self-contained questions, never raise;
the LLM fallback runs only for references the rules cannot resolve, and any failure keeps the question."""

from __future__ import annotations

import asyncio

import pytest

from ragmesh_gateway.query import arewrite_followup, rewrite_followup


def chat(*turns: tuple[str, str]) -> list[tuple[str, str]]:
    """History from (question, answer) pairs."""
    return [turn for question, answer in turns for turn in (("user", question), ("assistant", answer))]


@pytest.mark.parametrize(
    ("question", "history", "expected"),
    [
        (
            "When was it founded?",
            chat(("Tell me about IBM", "IBM is an American technology company.")),
            "When was IBM founded?",
        ),
        ("What is its revenue?", chat(("Tell me about IBM", "...")), "What is IBM's revenue?"),
        ("What did they announce?", chat(("Tell me about IBM", "...")), "What did IBM announce?"),
        (
            "Did she win an award for her album?",
            chat(("Tell me about Adele", "...")),
            "Did Adele win an award for Adele's album?",
        ),
        # "he" after a who-question is the answer, not the company asked about.
        (
            "When was he born?",
            chat(("Who founded Microsoft?", "Bill Gates and Paul Allen founded Microsoft.")),
            "When was Bill Gates born?",
        ),
        # The previous question was itself a follow-up: look one turn further back.
        ("Who runs it?", chat(("Tell me about IBM", "..."), ("When was it founded?", "1911.")), "Who runs IBM?"),
        # No named entity: the previous question's noun phrase is the topic.
        (
            "How much does it cost?",
            chat(("What is the premium support plan?", "...")),
            "How much does the premium support plan cost?",
        ),
        (
            "What does this policy cover?",
            chat(("What is the travel policy?", "...")),
            "What does the travel policy cover?",
        ),
    ],
)
def test_pronouns_are_resolved(question: str, history: list[tuple[str, str]], expected: str) -> None:
    result = rewrite_followup(question, history)
    assert (result.text, result.rewritten) == (expected, True)
    assert result.reason.startswith(("pronoun", "demonstrative"))


@pytest.mark.parametrize(
    ("question", "previous", "expected"),
    [
        ("What about Microsoft?", "When was IBM founded?", "When was Microsoft founded?"),
        ("And Microsoft?", "When was IBM founded?", "When was Microsoft founded?"),
        ("how about Google?", "How many employees does Microsoft have?", "How many employees does Google have?"),
        ("Same for Google", "How many employees does Microsoft have?", "How many employees does Google have?"),
        ("And in 2020?", "What was the revenue of IBM in 2019?", "What was the revenue of IBM in 2020?"),
        ("And the expense policy?", "What is the travel policy?", "What is the expense policy?"),
    ],
)
def test_ellipsis_reuses_the_previous_question(question: str, previous: str, expected: str) -> None:
    result = rewrite_followup(question, chat((previous, "an answer")))
    assert result == result.__class__(expected, True, "ellipsis")


@pytest.mark.parametrize(
    "question",
    [
        "When was Microsoft founded?",
        "Who founded the company that makes the iPhone?",  # "that" is a relative pronoun here
        "Is it possible to reset the VPN token for Okta?",  # expletive "it"
    ],
)
def test_self_contained_questions_are_kept(question: str) -> None:
    result = rewrite_followup(question, chat(("Tell me about IBM", "...")))
    assert (result.text, result.rewritten, result.reason) == (question, False, "self-contained")


@pytest.mark.parametrize(
    ("question", "history", "reason"),
    [
        ("When was it founded?", [], "no history"),
        ("When was it founded?", [("assistant", "Hello!")], "no history"),
        ("When was it founded?", chat(("hello", "hi")), "unresolved pronoun"),
        ("What about the price?", chat(("When was IBM founded?", "1911.")), "unresolved ellipsis"),
        ("", chat(("Tell me about IBM", "...")), "empty question"),
        ("it " * 5000, chat(("Tell me about IBM", "...")), "too long to rewrite"),
    ],
)
def test_unresolvable_or_odd_input_keeps_the_question(
    question: str, history: list[tuple[str, str]], reason: str
) -> None:
    result = rewrite_followup(question, history)
    assert (result.text, result.rewritten, result.reason) == (question, False, reason)


@pytest.mark.parametrize("history", [None, "not a list", [("user",)], [(1, 2)], [("user", None)], [None]])
def test_malformed_history_never_raises(history: object) -> None:
    result = rewrite_followup("When was it founded?", history)
    assert (result.text, result.rewritten) == ("When was it founded?", False)


class FakeLLM:
    def __init__(self, reply: str | Exception | None = None, delay: float = 0.0) -> None:
        self.reply, self.delay, self.prompts = reply, delay, []

    async def __call__(self, question: str, history: list[tuple[str, str]]) -> str:
        self.prompts.append(f"{history} {question}")
        if self.delay:
            await asyncio.sleep(self.delay)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


async def test_llm_not_called_when_rules_resolve_or_nothing_to_resolve() -> None:
    llm = FakeLLM("should not be used")
    resolved = await arewrite_followup("When was it founded?", chat(("Tell me about IBM", "...")), llm=llm)
    kept = await arewrite_followup("When was Microsoft founded?", chat(("Tell me about IBM", "...")), llm=llm)
    assert resolved.text == "When was IBM founded?" and kept.reason == "self-contained"
    assert llm.prompts == []


async def test_llm_resolves_what_the_rules_cannot() -> None:
    llm = FakeLLM("Rewritten question: What is the price of the IBM Z16 mainframe?\nextra line")
    history = chat(("When was IBM founded?", "1911."))
    result = await arewrite_followup("What about the price?", history, llm=llm)
    assert result == result.__class__("What is the price of the IBM Z16 mainframe?", True, "llm")
    assert len(llm.prompts) == 1 and "When was IBM founded?" in llm.prompts[0]


@pytest.mark.parametrize(
    ("llm", "reason", "degraded"),
    [
        (FakeLLM(RuntimeError("model down")), "unresolved ellipsis", "rewrite model failed (RuntimeError)"),
        (FakeLLM("late", delay=5.0), "unresolved ellipsis", "rewrite model timed out after 0.05s"),
        (FakeLLM(""), "llm output rejected", ""),
        (FakeLLM("x" * 5000), "llm output rejected", ""),
        (FakeLLM(None), "llm output rejected", ""),
    ],
)
async def test_llm_failure_keeps_the_original(llm: FakeLLM, reason: str, degraded: str) -> None:
    result = await arewrite_followup(
        "What about the price?", chat(("When was IBM founded?", "1911.")), llm=llm, timeout=0.05
    )
    assert (result.text, result.rewritten, result.reason, result.degraded) == (
        "What about the price?",
        False,
        reason,
        degraded,
    )


IBM = chat(
    (
        "When was IBM founded?",
        "IBM was founded in 1911 in Endicott, New York, and later moved its headquarters to Armonk, New York.",
    )
)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("And when did it move there?", "When did IBM move to Armonk, New York?"),  # conjunction, pronoun, place
        ("But where is it headquartered?", "Where is IBM headquartered?"),
        ("How many people worked there?", "How many people worked in Armonk, New York?"),  # place from the answer
        ("Is there a museum there?", "Is there a museum in Armonk, New York?"),  # the first "there" is no place
        ("What else happened that year?", "What else happened in 1911?"),
        ("Who was president back then?", "Who was president in 1911?"),
    ],
)
def test_place_time_and_leading_conjunctions(question: str, expected: str) -> None:
    result = rewrite_followup(question, IBM)
    assert (result.text, result.rewritten) == (expected, True), result.reason


@pytest.mark.parametrize(
    "question", ["Is there a travel policy?", "When was Microsoft founded in Redmond?", "Then what?"]
)
def test_questions_without_place_or_time_references_stay(question: str) -> None:
    result = rewrite_followup(question, IBM)
    assert result.text == question and not result.rewritten


async def test_llm_only_when_the_place_is_unknown_and_its_failure_keeps_the_rule_result() -> None:
    history = chat(("Tell me about IBM", "IBM is a technology company."))  # names no place
    rules = rewrite_followup("And when did it move there?", history)
    assert (rules.text, rules.reason) == ("When did IBM move there?", "unresolved place or time")
    good = FakeLLM("When did IBM move to Armonk?")
    assert (
        await arewrite_followup("And when did it move there?", history, llm=good)
    ).text == "When did IBM move to Armonk?"
    failed = await arewrite_followup("And when did it move there?", history, llm=FakeLLM(RuntimeError("down")))
    assert failed.text == "When did IBM move there?" and failed.rewritten and failed.degraded
    unused = FakeLLM("never")
    await arewrite_followup("And when did it move there?", IBM, llm=unused)
    assert unused.prompts == []


async def test_without_llm_the_async_variant_equals_the_rules() -> None:
    history = chat(("When was IBM founded?", "1911."))
    assert await arewrite_followup("What about the price?", history) == rewrite_followup(
        "What about the price?", history
    )


NUTS = chat(
    (
        "What are the two general types of self-locking nuts?",
        "The two general types of self-locking nuts are the all-metal type and the fiber lock type. [1, 4]",
    )
)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is the first one made of?", "What is the all-metal type made of?"),
        ("What is the latter used for?", "What is the fiber lock type used for?"),
        ("Is the second one cheaper?", "Is the fiber lock type cheaper?"),
        ("What was the first car?", "What was the first car?"),  # an ordinal before its noun is no reference
    ],
)
def test_an_ordinal_takes_the_item_of_the_previous_answers_list(question: str, expected: str) -> None:
    assert rewrite_followup(question, NUTS).text == expected


def test_an_ordinal_without_a_list_or_item_is_unresolved() -> None:
    no_list = chat(("When was IBM founded?", "IBM was founded in 1911."))
    assert rewrite_followup("What is the first one made of?", no_list).reason == "unresolved ordinal"
    assert rewrite_followup("Is the fifth one cheaper?", NUTS).reason == "unresolved ordinal"  # two items only


def test_a_topic_is_the_noun_phrase_without_its_participle_and_never_a_reference() -> None:
    """ "What is the travel policy based on?" names "the travel policy"; "What is the first one made of?", not
    rewritten, names nothing, so a pronoun after it looks further back."""
    based = chat(("What is the travel policy based on?", "..."))
    assert rewrite_followup("Who wrote it?", based).text == "Who wrote the travel policy?"
    shed = chat(("What is the garden shed?", "..."))  # a noun in -ed is no participle
    assert rewrite_followup("Who built it?", shed).text == "Who built the garden shed?"
    called = chat(("What is the travel policy called?", "..."))
    assert rewrite_followup("Who wrote it?", called).text == "Who wrote the travel policy?"
    unresolved = chat(("What is the travel policy?", "..."), ("What is the first one made of?", "..."))
    assert rewrite_followup("Who wrote it?", unresolved).text == "Who wrote the travel policy?"


def test_personal_and_other_pronouns_stand_for_different_things() -> None:
    """Stop 59: "When did he patent it?" after a who-question had both pronouns replaced by one name."""
    who = chat(("Who patented the Electric Tabulating Machine?", "Herman Hollerith.\n\nJulius E. Pitrap patented …"))
    result = rewrite_followup("When did he patent it?", who)
    assert result.text == "When did Herman Hollerith patent Electric Tabulating Machine?"
    founders = chat(("Who founded Microsoft?", "Bill Gates and Paul Allen founded Microsoft."))
    assert rewrite_followup("Where did he sell it?", founders).text == "Where did Bill Gates sell Microsoft?"
    # two personal pronouns of one person stay one person
    adele = chat(("Tell me about Adele", "..."))
    assert rewrite_followup("Did she win an award for her album?", adele).text == (
        "Did Adele win an award for Adele's album?"
    )


@pytest.mark.parametrize(
    ("question", "previous", "expected"),
    [
        ("And the time clock?", "Who invented the dial recorder?", "Who invented the time clock?"),
        ("And the movie?", "Who wrote the novel?", "Who wrote the movie?"),
        ("And the Selectric?", "When was the typewriter introduced?", "When was the Selectric introduced?"),
    ],
)
def test_an_ellipsis_with_an_article_takes_the_place_of_the_previous_object(
    question: str, previous: str, expected: str
) -> None:
    """Stop 59: "And the time clock?" after "Who invented the dial recorder?" was left unresolved, and "And the
    Selectric?" after "When was the typewriter introduced?" became "When was the Selectric?"."""
    assert rewrite_followup(question, chat((previous, "an answer"))).text == expected
    # a question that ends with its verb has no object to swap
    assert not rewrite_followup("And a duck?", chat(("What does a goose eat?", "Grass."))).rewritten

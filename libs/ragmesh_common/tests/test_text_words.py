"""The shared text library: one tokeniser, stemmer, stop-word list, sentence splitter, numbers and question types."""

from __future__ import annotations

import pytest

from ragmesh_common.text import questions
from ragmesh_common.text.numbers import has_date, number_supported, numbers
from ragmesh_common.text.questions import AnswerType, Question, question_type
from ragmesh_common.text.sentences import sentence_spans, split_sentences
from ragmesh_common.text.words import (
    MAX_SPECIFICITY,
    MIN_SPECIFICITY,
    content_words,
    related,
    same_sense,
    specificity,
    stem,
)


def test_content_words_drop_stop_words_and_keep_numbers() -> None:
    assert content_words("The answer is: employees get 25 days!") == {"employees", "get", "25", "days"}


def test_sentences_split_at_punctuation_and_line_breaks_not_abbreviations() -> None:
    assert split_sentences("One thing. Two things!\nThree") == ["One thing.", "Two things!", "Three"]
    text = "Dr. Smith met J. Doe, e.g. in Paris. Then he left."
    assert [text[s:e] for s, e in sentence_spans(text)] == ["Dr. Smith met J. Doe, e.g. in Paris.", "Then he left."]
    cited = "It debuted in 1981.[12] The company later found success."
    assert [cited[s:e] for s, e in sentence_spans(cited)] == ["It debuted in 1981.", "The company later found success."]
    # an HTML page's markers, joined with spaces (wiki_duck.html: a summary sentence opened with "[9] [16]")
    spaced = "It is in the subfamily Anserinae. [9] [16] The freckled duck is a duck."
    assert split_sentences(spaced) == ["It is in the subfamily Anserinae.", "The freckled duck is a duck."]
    cut = "[9] [16] The freckled duck is a duck."  # a chunk that starts between a sentence and its markers
    assert [cut[s:e] for s, e in sentence_spans(cut)] == ["The freckled duck is a duck."]
    dotted = "It held the record for most annual U.S. patents for 29 years. It sold its PC division in 2005."
    assert [dotted[s:e] for s, e in sentence_spans(dotted)] == [
        "It held the record for most annual U.S. patents for 29 years.",
        "It sold its PC division in 2005.",
    ]


def test_one_stemmer_meets_inflections_and_possessives() -> None:
    assert stem("founded") == stem("founder") == stem("founding") == stem("founds") == "found"
    assert stem("companies") == stem("company") == "company"
    assert stem("IBM's") == "ibm"
    # a silent final "e" and the "e" an inflection absorbed meet ("practice" / "practiced" / "practices")
    assert stem("practice") == stem("practiced") == stem("practices") == stem("practicing")
    assert stem("discontinue") == stem("discontinued") and stem("game") == stem("games")
    assert stem("agree") == stem("agreed") == stem("agrees") == stem("agreeing")
    assert stem("employee") == stem("employees") != stem("employer")
    # irregular past forms are their verb; "found" stays the root of "founded"
    assert stem("won") == stem("win") and stem("brought") == stem("bringing") and stem("taken") == stem("takes")
    assert stem("found") == stem("founded") != stem("find")


def test_numbers_compare_by_value() -> None:
    (claim,) = numbers("$5 million")
    assert number_supported(claim, numbers("5,000,000 dollars"))
    assert not number_supported(numbers("15%")[0], numbers("15 employees"))
    assert has_date("in March") and has_date("in 1911") and not has_date("in 12 offices")


def test_question_types() -> None:
    assert question_type("When was IBM founded?") is AnswerType.DATE
    assert question_type("How many employees does Acme have?") is AnswerType.NUMBER
    assert question_type("Who founded IBM?") is AnswerType.PERSON
    assert question_type("Where is IBM headquartered?") is AnswerType.PLACE
    assert question_type("In which city was it founded?") is AnswerType.PLACE
    assert question_type("Scott Howell has worked with the mayor of what city?") is AnswerType.PLACE
    assert question_type("Toad Hall is in a university located in what Australian city?") is AnswerType.PLACE
    assert question_type("What articles state that powers remain with member states?") is AnswerType.OTHER
    assert question_type("Kate Ramsay is a character from a soap opera created by whom?") is AnswerType.PERSON
    assert question_type("At the 2011 census, what was the population of the city?") is AnswerType.NUMBER
    assert question_type("What was Fresno's population in 2010?") is AnswerType.NUMBER
    assert question_type("What is the city's total population?") is AnswerType.NUMBER
    assert question_type("At the 2011 census, what was its population?") is AnswerType.NUMBER
    assert question_type("What was the population's main religion?") is AnswerType.OTHER
    assert question_type("A soap opera created by who?") is AnswerType.PERSON
    assert question_type("What is the capital?") is AnswerType.OTHER
    # asked with the last word: "… and is based where?" asks for a place, "… was built when?" for a date
    assert question_type("The novel was published by a house that is based where?") is AnswerType.PLACE
    assert question_type("The French church in Portarlington was built when?") is AnswerType.DATE
    assert question_type("There are direct contractual links between who?") is AnswerType.OTHER  # often a role
    assert question_type("What venue did Super Bowl 50 take place in?") is AnswerType.PLACE  # not "Super Bowl XXXVII"
    assert question_type("At which stadium was the final played?") is AnswerType.PLACE
    q = Question.parse("When was IBM founded in New York?")
    assert q.acronyms == ("IBM",) and q.entities == ("new", "york") and q.focus == ("founded",)
    # "located" only asks where: a sentence saying "X in Wellington" states it
    assert Question.parse("Where is Marsden School located?").focus == ()
    assert Question.parse("Which school is located in Wellington?").focus == ("school", "located")


def test_a_request_around_the_question_does_not_hide_what_it_asks() -> None:
    """Users frame questions ("Can you tell me who …"); the frame is neither the type nor a key term."""
    framed = Question.parse("Can you tell me who was Kennedy's vice president?")
    plain = Question.parse("Who was Kennedy's vice president?")
    assert framed.answer_type is plain.answer_type is AnswerType.PERSON
    assert (framed.entities, framed.focus) == (plain.entities, plain.focus) == (("kennedy",), ("vice", "president"))
    assert question_type("Do you know where the factories are?") is AnswerType.PLACE
    assert question_type("Tell me when IBM was founded") is AnswerType.DATE
    assert question_type("Could you please tell me how many people work at IBM?") is AnswerType.NUMBER
    assert question_type("I'd like to know who founded IBM.") is AnswerType.PERSON
    assert question_type("Do you know if IBM is older than Apple?") is AnswerType.YES_NO
    german = Question.parse("Können Sie mir sagen, wann IBM gegründet wurde?")
    assert german.answer_type is AnswerType.DATE and german.focus == ("gegründet",)  # nor "sagen", "mir", "wurde"
    french = Question.parse("Pouvez-vous me dire quand IBM a été fondée ?")
    assert french.answer_type is AnswerType.DATE and french.focus == ("fondée",)  # nor "dire", "été"
    assert question_type("Dites-moi où se trouve le siège d'IBM.") is AnswerType.PLACE
    # a request with no question in it, and a question that merely opens like one, stay what they were
    assert question_type("Can you tell me about IBM?") is AnswerType.OTHER
    assert question_type("Can you swim?") is AnswerType.YES_NO
    assert question_type("Do you know Fresno?") is AnswerType.YES_NO


def test_what_place_and_what_time_ask_where_and_when() -> None:
    place = Question.parse("In what place was IBM founded?")
    assert place.answer_type is AnswerType.PLACE and place.focus == ("founded",)  # "place" is no key term
    assert question_type("What location did they choose?") is AnswerType.PLACE
    time = Question.parse("At what time did the age of imperialism end?")
    assert time.answer_type is AnswerType.DATE and "time" not in time.focus
    assert question_type("What time zone is Fresno in?") is AnswerType.OTHER
    # a rank ("what place did ABC find itself in") is asked after a comma, not by an opening "what place"
    assert question_type("In the 1965-66 season, what place did ABC find itself in?") is AnswerType.OTHER


def test_what_is_the_date_asks_when() -> None:
    """Found asking an HTML receipt: "What was the receipt date?" was typed other and answered "table service"."""
    assert question_type("What was the receipt date?") is AnswerType.DATE
    assert question_type("What is the date of the merger?") is AnswerType.DATE
    assert question_type("What is the release date of the album?") is AnswerType.DATE
    assert question_type("What was the deadline for entries?") is AnswerType.DATE
    assert question_type("What are the dates' origins?") is AnswerType.OTHER
    assert question_type("What did they update?") is AnswerType.OTHER


def test_what_is_the_city_asks_where() -> None:
    """Found by using the product: "What is the IBM headquarters city?" was typed other and read as "what is X?"."""
    for asked in (
        "What is the IBM headquarters city?",
        "What is the capital of Prussia?",
        "What was the name of the city where IBM is headquartered?",
        "Which is the largest city in California?",
        "What is another country that permits it?",
    ):
        assert question_type(asked) is AnswerType.PLACE, asked
    # the place noun must head what is asked
    for asked in (
        "What is the city council called?",
        "What is the city's mayor called?",
        "What is the city known for?",
    ):
        assert question_type(asked) is AnswerType.OTHER, asked
    assert question_type("What is the population of the city?") is AnswerType.NUMBER


def test_word_families_match_but_not_mere_prefixes() -> None:
    assert related(stem("government"), stem("governed"))
    assert related(stem("discovered"), stem("discovery"))
    assert related(stem("retiring"), stem("retirements"))
    assert not related(stem("part"), stem("particular"))
    assert not related(stem("art"), stem("artist"))  # too short to be a root
    # a verb and its -ion noun whose root's last sound changed ("When did Sheryl Baxter subscribe?" found no
    # "Subscription Date" column)
    for verb, noun in [("subscribe", "subscription"), ("describe", "descriptions"), ("decided", "decision")]:
        assert related(stem(verb), stem(noun)) and related(stem(noun), stem(verb)), (verb, noun)
    assert related(stem("produce"), stem("production")) and related(stem("receive"), stem("reception"))
    assert not related(stem("bid"), stem("bision")) and not related(stem("describe"), stem("descent"))
    question = Question.parse("Which government department operated the mine?")
    assert question.coverage("The mine's operation by the governing department")[2] == list(question.focus)
    assert question.coverage("The partisans' mine")[2] == ["mine"]


def test_yes_no_questions_and_the_choices_a_question_offers() -> None:
    assert question_type("Are Christopher Nolan and Sathish Kalathil both film directors?") is AnswerType.YES_NO
    # the sentence that asks decides, not the statement before it
    assert question_type("The director X has an OBE. Does the director Y also have one?") is AnswerType.YES_NO
    assert question_type("Ist IBM ein Unternehmen?") is AnswerType.YES_NO
    assert question_type("Is it abstract or concrete?") is AnswerType.OTHER  # an alternative, not yes or no
    assert question_type("Was ist IBM?") is AnswerType.OTHER
    choice = Question.parse("Who is the oldest, Sid Haig or Vic Darchinyan?")
    assert choice.answer_type is AnswerType.PERSON and choice.options == ("Sid Haig", "Vic Darchinyan")
    assert Question.parse("Which band was formed first The Exies or Circus Diablo ?").options == (
        "Exies",
        "Circus Diablo",
    )
    assert Question.parse("Which is older, Bank of America or IBM?").options == ("Bank of America", "IBM")
    assert Question.parse("Which of the two bands was formed first, Mudhoney or Nirvana?").options == (
        "Mudhoney",
        "Nirvana",
    )
    assert Question.parse("Is a problem instance abstract or concrete?").options == ("abstract", "concrete")
    # a list in a wh-question, or a clause after "or", offers no choice
    assert Question.parse("Who would teach from a work like the Quran, Torah or Bible?").options == ()
    assert Question.parse("What is an example of a problem not known to exist in P or NP-complete?").options == ()
    assert Question.parse("Who is on the same level as accountants (Chartered or CPA)?").options == ()
    assert Question.parse("Would opportunities be the same in each subject, or would they vary?").options == ()
    assert choice.option_of("Sidney Eddie Haig") == "Sid Haig" and choice.offers("Vic Darchinyan")
    assert choice.option_of("Sid Haig or Vic Darchinyan") is None and not choice.offers("an actor")
    hyphens = Question.parse("Were Tesla's experiments high-voltage or low-voltage?")
    assert hyphens.option_of("high-voltage") == "high-voltage"  # "voltage" tells neither apart


def test_specificity_weighs_rare_words_above_common_ones() -> None:
    assert specificity("korfball") == MAX_SPECIFICITY  # rare: says what a question is about
    assert specificity("team") < specificity("membrane") < specificity("korfball")
    assert specificity("the") == MIN_SPECIFICITY
    assert specificity("xqzvbnw") == MAX_SPECIFICITY  # unknown to the list: a name, a misspelling
    assert specificity("team", "zz") == 1.0  # a language without a frequency list: every word the same


def test_a_sentence_that_says_a_question_term_in_other_words_covers_it() -> None:
    """WordNet synonyms in their commonest senses count as the question's word (inflections found by WordNet)."""
    assert same_sense("sent", "shipped", 2) and same_sense("founded", "established", 2)
    assert same_sense("died", "perished", 2)
    assert not same_sense("sent", "painted", 2) and not same_sense("founded", "closed", 2)
    assert not same_sense("sent", "shipped", 0)  # 0 senses: stems and word families only
    question = Question.parse("Where was Tesla's property sent?")
    assert question.coverage("Tesla's entire estate was shipped to Belgrade")[2] == ["sent"]
    assert question.coverage("Tesla's entire estate was painted in Belgrade")[2] == []
    assert question.says("shipped") and not question.says("painted")
    established = Question.parse("When was the company founded?")
    assert established.coverage("The company was established in 1911.")[2] == ["company", "founded"]


def test_synonyms_with_the_parser_setting_off_are_only_word_families(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(questions, "SYNONYM_SENSES", 0)
    question = Question.parse("Where was Tesla's property sent?")
    assert question.coverage("Tesla's entire estate was shipped to Belgrade")[2] == []
    assert not question.says("shipped")


def test_capitals_make_an_acronym_of_a_stop_word_and_may_beside_a_number_a_month() -> None:
    """Stop 59: "PAS" (French "pas"), "US", "IT" written in capitals are names; "May 2025" is a month."""
    q = Question.parse("To which organization is the PAS submission made?")
    assert q.acronyms == ("PAS",)
    assert Question.parse("Who did the US provide aid to?").acronyms == ("US",)
    assert Question.parse("Who did they give it to?").acronyms == ()
    assert Question.parse("WHO FOUNDED THE COMPANY?").acronyms == ()
    assert Question.parse("What was the cost in May 2025?").entities == ("may",)
    assert Question.parse("What may happen in 2025?").entities == ()

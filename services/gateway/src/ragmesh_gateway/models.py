"""The HTTP API's request and response models, and its one error model (the OpenAPI spec is built from them).

Requests are checked here, before any hop: text (`Text`) refuses control characters, NUL bytes and lone
surrogates, and every list, string and number is bounded. Responses allow extra fields, so that a field
added to a reply is a compatible change of the spec rather than a broken promise.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator
from pydantic.json_schema import models_json_schema

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh_common import limits
from ragmesh_gateway.validation import Identifier, Text

# the one table of limits (ragmesh_common.limits): the services downstream accept what this schema accepts
MAX_DOCUMENT_IDS = limits.DOCUMENT_IDS.value
MAX_LOOKUP_HASHES = limits.CONTENT_HASHES.value
MAX_ACL_ENTRIES = limits.ACL_ENTRIES.value
MAX_TITLE_CHARS = limits.TITLE.value
MAX_ACL_JSON_CHARS = limits.ACL_JSON.value
MAX_FILENAME_CHARS = limits.FILENAME.value
MAX_HISTORY_TURNS = limits.HISTORY_TURNS.value
MAX_CONVERSATION_TITLE_CHARS = limits.CONVERSATION_TITLE.value
MAX_FEEDBACK_COMMENT_CHARS = limits.FEEDBACK_COMMENT.value
MAX_CONVERSATION_PAGE = 1000
LANGUAGE_PATTERN = r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$"  # a BCP 47 language tag (de, de-CH, fr-FR)
# The search and chat requests' `language`: the hint a short or unclear query is analysed with.
LanguageHint = Annotated[
    str | None,
    Field(
        pattern=LANGUAGE_PATTERN,
        max_length=35,
        description="The user's language (ISO 639-1, e.g. de or de-CH), the hint the search analyses a short or unclear "
        "query with (German stemming for a German user); null = the request's Accept-Language, else detected. A query "
        "clearly written in one language is searched in that language",
    ),
]
INT32_MAX = 2**31 - 1  # the catalogue's offsets are int32 on the wire

Level = Literal["document", "section", "paragraph"]


# ---------- requests ----------

# linked documents (pipeline/link.py), a field of chat and search alike
LinkedDocuments = Annotated[
    int | None,
    Field(
        ge=0,
        le=10,
        description="Documents the question and its top passages name (by title), placed right after those passages "
        "(0 = off); null = the deployment default (GATEWAY_LINKED_DOCUMENTS)",
    ),
]


class Turn(BaseModel):
    role: Literal["user", "assistant"]
    content: Text = Field(max_length=limits.TURN.value)


class ContextIn(BaseModel):
    """Context assembly after the search (see retriever.proto ContextOptions); 0 = the service default."""

    enabled: bool = True
    document_expansion_threshold: float = Field(0.0, ge=0, le=1)
    max_chunks_per_document: int = Field(0, ge=0, le=100)
    sibling_expansion: bool = False
    thin_chunk_tokens: int = Field(0, ge=0, le=1000)
    coverage_boost: bool = False
    coverage_weight: float = Field(0.0, ge=0, le=10)
    mmr: bool = False
    mmr_lambda: float = Field(0.0, ge=0, le=1)
    token_budget: int = Field(0, ge=0, le=100000)


class ChatRequest(BaseModel):
    question: Text = Field(min_length=1, max_length=limits.QUESTION.value, description="The user's question")
    stream: bool = Field(False, description="Server-Sent Events when true, one JSON otherwise")
    history: list[Turn] = Field(default_factory=list, max_length=MAX_HISTORY_TURNS)
    top_k: int = Field(5, ge=1, le=limits.CHAT_TOP_K.value, description="Sources given to the answerer")
    alpha: float | None = Field(None, ge=0, le=1, description="Hybrid weight: 1 = vector only, 0 = BM25 only")
    language: LanguageHint = None
    levels: list[Level] = Field(
        default_factory=list, max_length=3, description="Chunk levels to search (manual override); default paragraph"
    )
    document_ids: list[uuid.UUID] = Field(
        default_factory=list, max_length=MAX_DOCUMENT_IDS, description="Restrict to these documents"
    )
    rerank: bool = True
    graph: bool = True
    graph_leg: bool | None = Field(
        None,
        description="The graph leg: chunks ranked by Personalized PageRank from the question's entities over your readable "
        "entity graph, fused with BM25 and vector; null = the deployment default (GATEWAY_GRAPH_LEG)",
    )
    linked_documents: LinkedDocuments = None
    max_tokens: int = Field(0, ge=0, le=1024, description="0 = the answerer's default")
    strategy: Literal["direct", "summary_first"] | None = Field(None, description="Manual strategy override")
    context: ContextIn | None = Field(None, description="Context assembly override")
    relevance_gate: bool = Field(True, description="Answer only from chunks the relevance grade keeps")
    fusion: Literal["relative_score", "ranked", "distribution_based"] = "relative_score"
    routing: bool = Field(True, description="Let the query router pick levels, strategy and sub-queries")
    conversation_id: uuid.UUID | None = Field(
        None,
        description="A conversation of yours (POST /api/v1/conversations): the turn is appended to it and its stored "
        "history resolves follow-ups; `history` must then be empty",
    )
    mode: Literal["auto", "direct", "agentic"] = Field(
        "auto",
        description="direct: one search; agentic: sub-questions searched in steps (bridge entities carried "
        "forward); auto: agentic for multi-part, comparison and bridge questions",
    )

    stream_draft: bool = Field(
        False,
        description="Also stream the model's unverified draft as `token` events; by default a stream carries "
        "only verified `sentence` events",
    )

    cache: bool = Field(
        True, description="Use the semantic cache: answer a close enough question from it, and store the answer"
    )

    @model_validator(mode="after")
    def _one_history(self) -> ChatRequest:
        if self.conversation_id is not None and self.history:
            raise ValueError("give conversation_id (the server keeps the history) or history, not both")
        return self


class SearchRequest(BaseModel):
    query: Text = Field(min_length=1, max_length=limits.QUESTION.value)
    routing: bool = Field(False, description="Let the query router pick levels, strategy and sub-queries")
    strategy: Literal["direct", "summary_first"] | None = Field(None, description="Manual strategy override")
    fusion: Literal["relative_score", "ranked", "distribution_based"] = "relative_score"
    feedback_docs: int = Field(0, ge=0, le=50, description="Vector pseudo-relevance feedback from the top N (0 = off)")
    feedback_weight: float = Field(1.0, gt=0, le=10)
    context: ContextIn | None = None
    top_k: int = Field(10, ge=1, le=limits.SEARCH_TOP_K.value)
    candidates: int | None = Field(None, ge=1, le=limits.CANDIDATES.value, description="Retrieved before rerank/gating")
    alpha: float | None = Field(None, ge=0, le=1)
    language: LanguageHint = None
    levels: list[Level] = Field(default_factory=list, max_length=3)
    document_ids: list[uuid.UUID] = Field(default_factory=list, max_length=MAX_DOCUMENT_IDS)
    rerank: bool = False
    relevance_gate: bool = Field(True, description="Keep only the chunks the relevance grade keeps")
    graph_leg: bool | None = Field(
        None,
        description="The graph leg: chunks ranked by Personalized PageRank from the question's entities over your readable "
        "entity graph, fused with BM25 and vector; null = the deployment default (GATEWAY_GRAPH_LEG)",
    )
    graph_weight: float | None = Field(None, ge=0, le=10, description="The graph leg's fusion weight; null = default")
    graph_seed_passages: int | None = Field(
        None,
        ge=0,
        le=50,
        description="The graph leg's walk also starts from the entities of the top N passages of a first search "
        "(0 = the question's entities only); null = the deployment default (GATEWAY_GRAPH_SEED_PASSAGES)",
    )
    graph_placement: Literal["fuse", "after"] | None = Field(
        None,
        description="fuse: the graph leg is a third leg of the fusion; after: the search's own order, with the "
        "documents of the leg's best chunks placed right after the top passages; null = the deployment default "
        "(GATEWAY_GRAPH_PLACEMENT)",
    )
    graph_placed: int | None = Field(
        None, ge=1, le=10, description="With placement `after`: documents placed; null = default (GATEWAY_GRAPH_PLACED)"
    )
    linked_documents: LinkedDocuments = None
    graph: bool = Field(False, description="Add `graph`: the entities the query names and their facts")


class AclIn(BaseModel):
    """Who may read a document besides its owner. Entries are identifiers as in tokens (1-128 characters of
    letters, digits, _ . @ : -); an unknown key is an error, since a misspelt one would silently leave the
    default ACL."""

    model_config = ConfigDict(extra="forbid")

    public: bool = False
    departments: list[Identifier] = Field(default_factory=list, max_length=MAX_ACL_ENTRIES)
    roles: list[Identifier] = Field(default_factory=list, max_length=MAX_ACL_ENTRIES)
    users: list[Identifier] = Field(default_factory=list, max_length=MAX_ACL_ENTRIES)


class DocumentPatch(BaseModel):
    """PATCH /api/v1/documents/{id}: what to change (the owner only); an absent or null field is kept. An `acl`
    replaces the whole ACL; `{}` makes the document private to its owner."""

    model_config = ConfigDict(extra="forbid")

    title: Text | None = Field(None, min_length=1, max_length=MAX_TITLE_CHARS)
    acl: AclIn | None = None

    @model_validator(mode="after")
    def _something(self) -> DocumentPatch:
        if self.title is None and self.acl is None:
            raise ValueError("nothing to change: give title and/or acl")
        return self


class DocumentLookup(BaseModel):
    """POST /api/v1/documents/lookup: which of these contents (hex SHA-256 of the bytes) are already documents
    you may read; `mine`: only your own (the ones an upload of the same bytes would answer as a duplicate)."""

    model_config = ConfigDict(extra="forbid")

    content_sha256: list[Annotated[str, Field(pattern=r"^[0-9a-fA-F]{64}$")]] = Field(
        min_length=1, max_length=MAX_LOOKUP_HASHES
    )
    mine: bool = False


class ConversationIn(BaseModel):
    """POST /api/v1/conversations: an empty or absent title is taken from the first question."""

    model_config = ConfigDict(extra="forbid")

    title: Text = Field("", max_length=MAX_CONVERSATION_TITLE_CHARS)


class ConversationPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: Text = Field(min_length=1, max_length=MAX_CONVERSATION_TITLE_CHARS)


class FeedbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rating: Literal["up", "down"]
    comment: Text = Field("", max_length=MAX_FEEDBACK_COMMENT_CHARS)


# ---------- responses ----------
class Reply(BaseModel):
    model_config = ConfigDict(extra="allow")


class FieldError(Reply):
    loc: list[str | int] = Field(description="Where: body, query, path or header, then the field")
    msg: str
    type: str


class StepError(Reply):
    step: str = Field(description="The hop that failed or refused: guardrail, retrieve, answer, catalogue, …")
    service: str | None = Field(None, description="The service behind the step (retriever, answerer, …), when one")
    message: str
    status: int | None = None
    trace_id: str | None = None
    retry_after: int | None = Field(None, description="a busy step: seconds after which a retry is expected to fit")


class ErrorResponse(Reply):
    """Every 4xx and 5xx: a message, a failed step, or the list of invalid fields (422)."""

    detail: str | StepError | list[FieldError]
    message: str | None = Field(None, description="422: the invalid fields in the user's language (Accept-Language)")


class Scores(Reply):
    score: float
    hybrid: float
    lexical: float
    vector: float
    rerank: float | None = None


class Source(Reply):
    index: int
    document_id: str
    chunk_id: str
    title: str
    section_path: list[str]
    page: int | None = None
    kind: str
    snippet: str
    origin: str = Field(description="why the chunk is there: search, summary, sibling, …")
    scores: Scores
    cited: bool | None = Field(None, description="the answer cites it (chat only)")
    support: float | None = Field(None, description="how strongly the answer draws on it, 0..1 (chat only)")


class Citation(Reply):
    source: int = Field(description="the cited source's `index`")
    chunk_id: str
    support: float


class Degradation(Reply):
    step: str = Field(description="the optional step that did not do its part: embed, rewrite, rerank, link, graph")
    reason: str


class Outcome(StrEnum):
    """What a chat did: answered, or why not (each with its own message as `answer`)."""

    ANSWER = "answer"
    NO_PERMISSION = "no_permission"  # the user may read no document at all
    NO_MATCH_IN_FILTER = "no_match_in_filter"  # none of the selected documents is readable
    INGESTING = "ingesting"  # the readable documents are all still being processed
    NO_SOURCES = "no_sources"  # nothing relevant enough: the relevance grade refused to answer


class Evidence(Reply):
    """A quote the answer rests on, cut from a source: `quote` is `text[start:end]` of that chunk."""

    source: int = Field(description="the source's `index`")
    document_id: str
    title: str
    section_path: list[str]
    page: int | None = None
    quote: str
    start: int
    end: int


# How verification judged one answer sentence: answerer.proto's Verdict names, so a new verdict there is listed
# here without an edit.
VERDICTS: list[JsonValue] = [name.removeprefix("VERDICT_").lower() for name, _ in answerer_pb2.Verdict.items()]


class Sentence(Reply):
    """One sentence of the answer and its verification verdict."""

    text: str
    supported: bool
    sources: list[int] = Field(description="the `index` of the sources it was checked against")
    unsupported_tokens: list[str] = Field(description="numbers and names the evidence does not state")
    reason: str
    verdict: str = Field(json_schema_extra={"enum": VERDICTS}, description="supported, or why not")
    short_answer: bool = Field(description="this sentence is the short answer")


class Corrective(Reply):
    """The corrective retrieval run for an ambiguous grade."""

    query: str
    alpha: float
    levels: list[str]
    candidates: int
    added: int
    first_grade: str
    first_reasons: list[str]


class Relevance(Reply):
    """The relevance grade of the candidates (CRAG): only `correct` is answered with the gate on."""

    grade: Literal["correct", "ambiguous", "incorrect"]
    reasons: list[str]
    kept: int
    strong: int
    weak: int
    candidates: int
    corrective: Corrective | None = None
    gate: Literal["off"] | None = Field(None, description="'off' when the request turned the relevance gate off")


class Stage(StrEnum):
    GUARDRAIL = "guardrail"
    UNDERSTAND = "understand"
    CACHE = "cache"
    EMBED = "embed"
    RETRIEVE = "retrieve"
    RERANK = "rerank"
    GRADE = "grade"
    LINK = "link"
    GRAPH = "graph"
    COMMUNITIES = "communities"
    ANSWER = "answer"
    CONVERSATION = "conversation"
    PLAN = "plan"
    ITERATE = "iterate"
    DISTINCT = "distinct"
    DEFINE = "define"
    TABLE = "table"
    BUDGET = "budget"


class StageRecord(Reply):
    """What one step did: its time and its own figures (a search's `progress`)."""

    stage: Stage
    ms: float | None = Field(None, description="the step's time (done)")
    degraded: bool | None = Field(None, description="an optional step that degraded (embed, rerank, link, graph)")
    query: str | None = Field(None, description="understand: the question searched")
    rewritten: bool | None = Field(None, description="understand: the follow-up was rewritten")
    kind: str | None = Field(None, description="understand: the question's kind (router)")
    multi_hop: bool | None = Field(None, description="understand: the router found several hops")
    in_: str | None = Field(None, alias="in", description="embed: the service that embedded the question")
    candidates: int | None = Field(None, description="retrieve: results before rerank and grade")
    accessible_documents: int | None = None
    searches: int | None = Field(None, description="retrieve: the question and its sub-queries")
    strategy: str | None = None
    grade: str | None = Field(None, description="grade: correct, ambiguous or incorrect")
    relevant: int | None = Field(None, description="grade: the candidates kept")
    linked: int | None = Field(None, description="link: documents the top passages name, placed after them")
    titles: int | None = Field(None, description="link: names looked up as document titles")
    facts: int | None = Field(None, description="graph: relations given to the answerer")
    entities: int | None = Field(None, description="graph: entities the question names")
    reports: int | None = Field(None, description="communities: community reports the answer draws on")
    sentences: int | None = Field(None, description="communities: report sentences kept by the reduce")
    searched: int | None = Field(
        None, description="communities: search passages on the question's topic in place of report sources that are not"
    )
    position: int | None = Field(None, description="answer queued: the place in the answerer's queue")
    estimated_wait_s: float | None = None
    first_token_ms: float | None = Field(None, description="answer done: time to the first streamed draft token")
    first_sentence_ms: float | None = Field(None, description="answer done: time to the first verified sentence")
    history_turns: int | None = Field(None, description="conversation: stored turns used as the history")
    hit: bool | None = Field(None, description="cache: answered from the semantic cache")
    similarity: float | None = Field(None, description="cache: cosine of the question to the closest cached one")
    mode: str | None = Field(None, description="plan: direct or agentic")
    method: str | None = Field(None, description="plan: how the sub-questions were found (rules, llm, none)")
    sub_questions: list[str] | None = Field(None, description="plan: the sub-questions (#1: the bridge slot)")
    steps: int | None = Field(None, description="iterate: the steps run (a cut one included)")
    found: int | None = Field(None, description="iterate: the steps that found relevant evidence")
    agent_step: str | None = Field(None, description="retrieve/rerank/grade within an agentic step: its query")
    llm_tokens: int | None = Field(None, description="budget: LLM tokens of the request with the answer (estimated)")
    cut: str | None = Field(None, description="budget: the step cut by the LLM token limit (answer)")
    dropped: int | None = Field(
        None, description="distinct: sources left out that restate a better-ranked one of their document"
    )
    term: str | None = Field(None, description="define: the term the question asks the definition of")
    promoted_from: int | None = Field(
        None, description="define: the rank of the candidate that says what the term is, moved into the sources"
    )
    deeper: int | None = Field(
        None, description="define: the candidates a deeper search read, when none of the first said what the term is"
    )
    table_chunks: int | None = Field(
        None, description="table: the chunks of the table a superlative question is about, read from its document"
    )
    added: int | None = Field(None, description="table: those chunks given to the answer after its sources")
    complete: bool | None = Field(
        None, description="table: the whole table was read (false: more chunks than GATEWAY_TABLE_CHUNKS)"
    )


class ProgressEvent(StageRecord):
    """SSE `progress`: a step started, waits in the answerer's queue, or is done (with its own figures)."""

    status: Literal["started", "queued", "done"]


class AgentStep(Reply):
    """One step of a multi-step answer (SSE `step`, and the final event's `steps`)."""

    index: int
    tool: Literal["search", "fetch_section", "graph_neighbours"] = Field(
        "search",
        description="search (the sub-question searched); fetch_section (a document's section by title: `query` is "
        "the title); graph_neighbours (the graph's entities next to those `query` names, as `entities`)",
    )
    sub_question: str = Field(description="the planned sub-question (#1: the bridge slot)")
    query: str = Field(description="what was searched last (the bridge filled in, or the reformulation)")
    queries: list[str] | None = Field(None, description="every search of the step, the reformulation last")
    sources: int = Field(description="relevant chunks the step found (0: none)")
    documents: list[str] | None = Field(None, description="the documents of those chunks")
    decision: Literal["found", "retried", "gave_up", "cut"] = Field(
        description="found; found after one reformulation (retried); no relevant evidence (gave_up); cut by a bound"
    )
    grade: str | None = Field(None, description="the relevance grade of the step's search")
    bridge: str | None = Field(None, description="the entity taken from the step's best evidence for the next")
    entities: list[str] | None = Field(None, description="graph_neighbours: the neighbouring entities found")
    cut: str | None = Field(None, description="the bound that cut the step")
    ms: float | None = None


class TokenEvent(Reply):
    """SSE `token`: a piece of the answer text (or the outcome's message when there is no answer)."""

    text: str


class SentenceEvent(Reply):
    """SSE `sentence`: one answer sentence, sent once it passed verification (a failing one is never sent)."""

    index: int = Field(description="the sentence's place in the answer, from 0")
    text: str
    sources: list[int] = Field(description="the sources (numbered from 1) whose evidence supports it")
    extractive: bool = Field(description="the sentence is the source's own (the model was overruled or not asked)")


class TokenUsage(Reply):
    input_tokens: int = Field(description="prompt tokens, as the model server counted them")
    output_tokens: int = Field(description="completion tokens")


class AnswerSpan(Reply):
    """The extractive short answer: the exact span of a source's text, with the sentence it was cut from."""

    source: int = Field(description="the source, numbered from 1")
    chunk_id: str
    text: str
    start: int = Field(description="offset of the span in the source's text")
    end: int
    quote: str = Field(description="the evidence sentence holding the span")
    quote_start: int
    quote_end: int


class GraphEntityOut(Reply):
    id: str = Field(description="for GET /api/v1/graph/entities/{id}")
    name: str
    type: str
    mentions: int = Field(description="readable chunks that mention it")
    chunk_ids: list[str] = Field(default_factory=list, description="readable chunks that mention it (its sources)")


class GraphFactOut(Reply):
    source: str
    relation: str
    target: str
    chunk_ids: list[str] = Field(description="the readable chunks the fact was read from")


class GraphCommunityOut(Reply):
    id: str
    level: int
    title: str
    size: int = Field(description="readable members")
    key_entities: list[str] = Field(default_factory=list)
    sources: list[int] = Field(default_factory=list, description="the sources (1-based) its sentences come from")


class GraphOut(Reply):
    """What the graph contributed: entities named in the question, facts given to the answerer, and the
    communities a collection-level question was answered from; all from chunks the user can read."""

    entities: list[GraphEntityOut] = Field(default_factory=list)
    facts: list[GraphFactOut] = Field(default_factory=list)
    communities: list[GraphCommunityOut] = Field(default_factory=list)


class FinalEvent(Reply):
    """SSE `final`, and the JSON reply without `progress`. The fields from `model` to `sentences` come with an
    answer (`outcome` "answer") only."""

    outcome: Outcome
    answer: str = Field(description="the answer, or the outcome's message")
    sources: list[Source]
    citations: list[Citation]
    grounding_score: float | None = None
    grounded: bool | None = None
    warnings: list[str]
    degraded: list[Degradation]
    accessible_documents: int
    trace_id: str
    relevance: Relevance | None = Field(None, description="the relevance grade (null when retrieval found no scope)")
    rewritten_question: str | None = Field(None, description="the follow-up as rewritten from the history")
    notes: list[str] = Field(description="what the user should know, e.g. documents still being processed")
    ingesting_documents: int = Field(description="readable documents still being processed (not searched)")
    model: str | None = None
    short_answer: str | None = Field(None, description="the answer in a few words, cut from the evidence")
    verified: bool | None = Field(None, description="every sentence of the answer is supported by its evidence")
    withheld: bool | None = Field(None, description="the draft failed verification and is not the answer")
    draft: str | None = Field(None, description="the model's unverified draft, when it was withheld")
    overruled: bool | None = Field(None, description="the model disagreed with the evidence; the source's span stands")
    answer_span: AnswerSpan | None = Field(
        None, description="where the short answer was cut from (null: none verified)"
    )
    evidence: list[Evidence] | None = None
    sentences: list[Sentence] | None = None
    usage: TokenUsage | None = Field(
        None,
        description="the model's tokens for this answer (0 when it was not asked, as on a cache hit); null for "
        "an outcome that is not an answer, or when the model server did not count them",
    )
    conversation_id: str | None = Field(None, description="the conversation the turn was appended to")
    mode: Literal["direct", "agentic"] | None = Field(None, description="how the chat was answered")
    steps: list[AgentStep] | None = Field(None, description="agentic: the steps, as their `step` events")
    message_id: str | None = Field(
        None, description="the stored turn (for feedback); null without a conversation or when storing it failed"
    )
    cache_hit: bool = Field(False, description="answered from the semantic cache")
    cached_trace_id: str | None = Field(None, description="a cache hit: the trace of the request that answered it")
    graph: GraphOut | None = Field(None, description="what the graph contributed (null: the graph did not run)")


class ChatResponse(FinalEvent):
    progress: list[ProgressEvent] = Field(description="The stages as the progress events report them")


class SearchResponse(Reply):
    results: list[Source]
    accessible_documents: int
    degraded: list[Degradation]
    progress: list[StageRecord]
    graph: GraphOut | None = Field(None, description="with `graph`: entities and facts (null: not asked)")


class EntityRef(Reply):
    document_id: str
    chunk_id: str


class EntityList(Reply):
    entities: list[GraphEntityOut]


class EntityDetail(Reply):
    entity: GraphEntityOut
    neighbours: list[GraphEntityOut]
    facts: list[GraphFactOut]
    mentions: list[EntityRef]
    communities: list[GraphCommunityOut] = Field(description="top level first")


class CommunityStatusOut(Reply):
    state: Literal["never", "running", "ready", "failed"]
    computed_at: str | None
    duration_seconds: float
    entities: int
    edges: int
    communities_per_level: list[int]
    error: str | None
    signature: str


class ConversationOut(Reply):
    conversation_id: str
    title: str
    created_at: str
    updated_at: str
    message_count: int


class ConversationDeleted(Reply):
    conversation_id: str
    deleted: bool


class ConversationList(Reply):
    conversations: list[ConversationOut] = Field(description="most recently active first")
    next_cursor: str = Field(description="pass as `cursor` for the next page; empty on the last")


class Verification(Reply):
    verified: bool | None = None
    withheld: bool | None = None
    grounded: bool | None = None
    grounding_score: float | None = None
    warnings: list[str] = Field(default_factory=list)
    sentences: list[Sentence] = Field(default_factory=list)
    citations: list[Citation] = Field(default_factory=list)


class FeedbackOut(Reply):
    rating: Literal["up", "down"]
    comment: str


class MessageOut(Reply):
    """One turn. `withdrawn`: a document its answer drew on was deleted or is no longer readable by you, so the
    answer, rewritten question, sources, evidence and verification are hidden; the question stays."""

    message_id: str
    question: str
    rewritten_question: str | None = None
    answer: str
    short_answer: str | None = None
    evidence: list[Evidence]
    sources: list[Source]
    verification: Verification | None = None
    outcome: Outcome
    trace_id: str
    time: str
    withdrawn: bool
    note: str | None = Field(None, description="why the answer is hidden, when withdrawn")
    feedback: FeedbackOut | None = None


class ConversationDetail(ConversationOut):
    messages: list[MessageOut] = Field(description="oldest first")


class FeedbackEntry(Reply):
    """Admin view: no question or answer (those stay the user's)."""

    message_id: str
    user_id: str
    rating: str
    comment: str
    trace_id: str
    time: str


class FeedbackList(Reply):
    feedback: list[FeedbackEntry]


class RatedMessage(Reply):
    """One of your rated messages as an evaluation case."""

    message_id: str
    conversation_id: str
    question: str
    answer: str
    sources: list[Source]
    rating: str
    comment: str
    trace_id: str
    withdrawn: bool


class RatedMessageList(Reply):
    messages: list[RatedMessage]


class AclOut(Reply):
    public: bool
    departments: list[str]
    roles: list[str]
    users: list[str]


class DocumentOut(Reply):
    document_id: str
    title: str
    filename: str
    mime_type: str
    owner_user: str
    owner_department: str
    acl: AclOut
    status: str = Field(description="queued, parsing, embedding, indexing, ready or failed")
    error: str
    chunk_count: int
    page_count: int
    created_at: str
    updated_at: str
    summary: str
    size_bytes: int
    content_sha256: str = Field(description="hex SHA-256 of the visible version's bytes")
    version: int = Field(description="the visible (searchable) version, from 1")
    warnings: list[str] = Field(description="ready with warnings: parts that could not be read")
    pending_version: int = Field(
        description="a new version or re-ingest in progress (0 = none); the visible "
        "version stays searchable until it replaces it"
    )
    pending_status: str = Field(description="the pending version's status ('' when none)")
    pending_error: str
    title_given: bool = Field(
        description="a person chose the title (upload, connector source, update): ingestion keeps it; otherwise "
        "the file name's stem until the parser finds the document's own title"
    )
    parser_version: int = Field(
        description="the parser's reading the visible version was parsed with (0: before readings were recorded); "
        "lower than /api/v1/formats' parser_version: re-ingest to read the file as the parser now would"
    )


class UploadResponse(DocumentOut):
    events_url: str
    duplicate: bool = Field(
        False,
        description="true (HTTP 200): you already have a document with these bytes; "
        "it is returned and nothing was queued",
    )


class NewVersionResponse(DocumentOut):
    events_url: str
    unchanged: bool = Field(description="true (HTTP 200): the bytes are the visible version's; nothing was queued")
    ingesting_version: int = Field(description="the version being ingested (0 when unchanged)")
    note: str


class DocumentList(Reply):
    documents: list[DocumentOut]
    total: int
    next_cursor: str = Field(description="pass as `cursor` (same filters) for the next page; empty on the last")


class AuditEntry(Reply):
    audit_id: str
    document_id: str
    actor: str
    time: str
    action: str = Field(description="create, update, new_version, reingest or delete")
    before: dict[str, Any]
    after: dict[str, Any]


class AuditList(Reply):
    entries: list[AuditEntry]
    next_cursor: str


class ChunkOut(Reply):
    chunk_id: str
    level: str = Field(description="document, section or paragraph")
    section_path: list[str]
    page: int
    text: str
    token_count: int
    kind: str
    ordinal: int
    parent_id: str


class ChunkList(Reply):
    chunks: list[ChunkOut]
    next_cursor: str


class ProblemDocument(Reply):
    document: DocumentOut
    problem: str = Field(description="failed, stuck, version_failed or version_stuck")
    reason: str
    idle_seconds: float


class ProblemList(Reply):
    documents: list[ProblemDocument]


class FormatList(Reply):
    extensions: list[str] = Field(description="file name extensions an upload may have, with the dot")
    parser_version: int = Field(
        description="the parser's current reading (0 when it did not answer): a document parsed with a lower one "
        "is stale (`GET /api/v1/documents?stale=true`)"
    )


class DeleteResponse(Reply):
    document_id: str
    deleted: bool
    warnings: list[str]


class TraceSummary(Reply):
    trace_id: str
    start_time: str
    duration_ms: float
    span_count: int
    services: list[str]
    root_name: str | None = None
    has_error: bool | None = None
    user_id: str | None = None


class TraceList(Reply):
    traces: list[TraceSummary]
    next_offset: int | None = Field(None, description="the `offset` of the next page; null on the last page")


class StepStats(Reply):
    """One span name's latency and errors over the window (client spans left out: a hop counts once)."""

    service: str
    name: str
    count: int
    errors: int
    error_rate: float
    p50_ms: float
    p95_ms: float
    p99_ms: float


class TraceStats(Reply):
    since: str
    until: str
    steps: list[StepStats]


class AdminLogin(BaseModel):
    """A credential to exchange for a dashboard session: an admin's bearer JWT (the dev token locally)."""

    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, max_length=16384)


class SignedOut(Reply):
    user_id: str
    signed_out: bool


class AdminSession(Reply):
    user_id: str
    roles: list[str]
    csrf_token: str = Field(description="send it as X-CSRF-Token with every request that changes something")
    expires_at: str


class Span(Reply):
    span_id: str
    parent_span_id: str | None = None
    name: str
    service: str
    kind: str | None = None
    start_time: str
    end_time: str | None = None
    duration_ms: float | None = None
    status_code: str | None = None
    status_message: str | None = None
    attributes: dict[str, Any] | None = None
    events: list[Any] | None = None


class TraceDetail(Reply):
    trace_id: str
    spans: list[Span]


class IngestionBacklog(Reply):
    """Ingestion work not yet taken by a worker (all gateways and workers share the broker)."""

    queued_tasks: int = Field(description="tasks waiting in the broker's ingestion queue")


class CacheStats(Reply):
    """The semantic cache's counters since Redis was last emptied (all gateways together)."""

    enabled: bool
    hits: int
    misses: int
    refused: int = Field(description="close cached answers not served: a source unreadable by the asker, or changed")
    stores: int
    invalidated: int = Field(description="entries dropped on a document's change or deletion")
    errors: int = Field(description="lookups not made: Redis or the access check unavailable")
    cleared: int = Field(0, description="entries dropped by an admin's clear (DELETE /api/v1/admin/cache)")
    entries: int
    hit_rate: float | None = Field(None, description="hits / (hits + misses); null before any lookup")


class CacheCleared(Reply):
    """What an admin's clear of the semantic cache dropped."""

    cleared: int = Field(description="cached answers dropped (every user's, every option bucket)")


class Health(Reply):
    status: str


class Readiness(Reply):
    ready: bool
    services: dict[str, str]
    degraded: list[str] = Field(default_factory=list, description="optional parts that are down (chat degrades)")
    reason: str | None = Field(None, description="why chat cannot be answered (503 only)")


def sse_event_schema(events: list[str], data: dict[str, Any]) -> dict[str, Any]:
    """One Server-Sent Event as OpenAPI 3.1 describes an event stream's items: the event's name and its data,
    a JSON text whose schema is `data`."""
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"type": "string", "enum": events},
            "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": data},
            "id": {"type": "string"},
            "retry": {"type": "integer"},
        },
    }


# A chat's Server-Sent Events: each event name with the model of its data (components/schemas).
CHAT_EVENT_MODELS: dict[str, type[BaseModel]] = {
    "progress": ProgressEvent,
    "step": AgentStep,
    "token": TokenEvent,
    "sentence": SentenceEvent,
    "final": FinalEvent,
    "error": StepError,
}
CHAT_EVENTS = {
    "oneOf": [
        sse_event_schema([name], {"$ref": f"#/components/schemas/{model.__name__}"})
        for name, model in CHAT_EVENT_MODELS.items()
    ]
}
CHAT_EVENTS_DESCRIPTION = (
    "JSON (ChatResponse), or text/event-stream when stream=true: `progress` (ProgressEvent) as each step "
    "starts, queues or ends; `step` (AgentStep) each step of an agentic answer; `token` (TokenEvent) pieces of the answer; one `final` (FinalEvent, the JSON "
    "reply without `progress`) or one `error` (StepError: a step failed after the response began) last."
)


def with_event_schemas(openapi: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """`openapi` (an app's spec builder) with the chat events' models added to components/schemas, where
    CHAT_EVENTS refers to them (FastAPI adds only the models of request and response bodies)."""

    def build() -> dict[str, Any]:
        spec = openapi()
        schemas = spec.setdefault("components", {}).setdefault("schemas", {})
        if not all(model.__name__ in schemas for model in CHAT_EVENT_MODELS.values()):
            _, defs = models_json_schema(
                [(model, "serialization") for model in CHAT_EVENT_MODELS.values()],
                ref_template="#/components/schemas/{model}",
            )
            for name, definition in defs.get("$defs", {}).items():
                schemas.setdefault(name, definition)
        return spec

    return build


DOCUMENT_EVENTS = sse_event_schema(
    ["status"],
    {
        "type": "object",
        "required": ["document_id", "status"],
        "properties": {
            "document_id": {"type": "string"},
            "status": {"type": "string"},
            "error": {"type": ["string", "null"]},
        },
    },
)

ERROR_DESCRIPTIONS = {
    400: "Bad request (for example a question the guardrails reject)",
    401: "Missing or invalid bearer token",
    403: "Not allowed (for example a non-owner deleting, or a non-admin reading traces)",
    404: "Not found, or not readable by you",
    409: "Conflict with the document's state (for example its stored file is gone)",
    413: "Too large",
    415: "Unsupported file type",
    422: "Invalid request: the fields and what is wrong with each",
    429: "Rate limit; retry after the Retry-After header's seconds",
    503: "A required step is unavailable; the message names the step and the cause",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for these error statuses, all with the ErrorResponse model."""
    return {code: {"model": ErrorResponse, "description": ERROR_DESCRIPTIONS[code]} for code in codes}

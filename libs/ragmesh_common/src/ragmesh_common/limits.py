"""The one table of request limits: every bound a client or a service can hit, declared once.

The gateway's HTTP schema (ragmesh_gateway.models), every gRPC service's validation interceptor
(`ragmesh_common.validation`, through `FIELDS` below) and the README's limits table (a test compares them) read
these numbers, so a request the API accepts is never refused further down for being too long.

ACL rules live here too: an ACL entry is an identifier as in tokens (`ragmesh_common.identity.validate_identifier`),
at most `ACL_ENTRIES` per list; the gateway's schema and the retriever's catalogue both call `check_acl_names`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ragmesh_common.identity import IDENTIFIER_MAX_CHARS, validate_identifier


@dataclass(frozen=True)
class Limit:
    """One bound: `value` characters of a text, or items of a list (`unit`)."""

    name: str
    value: int
    unit: Literal["characters", "items"]
    what: str


QUESTION = Limit(
    "question", 4000, "characters", "a chat question, a search query, each sub-query (API and every service)"
)
HISTORY_TURNS = Limit("history turns", 20, "items", "chat history turns sent with a question")
TURN = Limit("history turn", 8000, "characters", "the content of one history turn")
TITLE = Limit("title", 500, "characters", "a document title given at upload or in an update")
FILENAME = Limit("file name", 1024, "characters", "an upload's file name as sent (stored shortened to 200)")
ACL_ENTRIES = Limit("ACL entries", 256, "items", "entries in each ACL list (departments, roles, users)")
IDENTIFIER = Limit(
    "identifier", IDENTIFIER_MAX_CHARS, "characters", "a user, department or role name (token claims, ACL entries)"
)
ACL_JSON = Limit("ACL form field", 65536, "characters", "the upload's `acl` form field (JSON)")
DOCUMENT_IDS = Limit("document ids", 1000, "items", "documents a chat or search request is restricted to")
CONTENT_HASHES = Limit("content hashes", 1000, "items", "contents (SHA-256) one document lookup asks about")
ACCESS_CHECK_IDS = Limit(
    "access-check ids", 100_000, "items", "document ids in one internal access check or graph call"
)
CHAT_TOP_K = Limit("chat top_k", 20, "items", "sources given to the answerer for one chat question")
SEARCH_TOP_K = Limit("search top_k", 100, "items", "results of one search request")
CANDIDATES = Limit("candidates", 1000, "items", "chunks retrieved before rerank and grading (the retriever's top_k)")
SUB_QUERIES = Limit("sub-queries", 16, "items", "sub-queries of one retrieval (query routing)")
CONVERSATION_TITLE = Limit(
    "conversation title", 200, "characters", "a conversation's title (given or from its first question)"
)
FEEDBACK_COMMENT = Limit("feedback comment", 2000, "characters", "the comment with a rating of an answer")
CURSOR = Limit("cursor", 2000, "characters", "a paging cursor")
ID = Limit("id", 512, "characters", "a document or chunk id sent to a service")
BRIDGES = Limit(
    "bridges", 10, "items", "entities a multi-step answer searched with, sent to the answerer (each: title)"
)

ALL: tuple[Limit, ...] = (
    QUESTION,
    HISTORY_TURNS,
    TURN,
    TITLE,
    FILENAME,
    ACL_ENTRIES,
    IDENTIFIER,
    ACL_JSON,
    DOCUMENT_IDS,
    CONTENT_HASHES,
    ACCESS_CHECK_IDS,
    CHAT_TOP_K,
    SEARCH_TOP_K,
    CANDIDATES,
    SUB_QUERIES,
    CONVERSATION_TITLE,
    FEEDBACK_COMMENT,
    CURSOR,
    ID,
    BRIDGES,
)

# gRPC request fields (full protobuf names) and their limits: characters for a string (each item of a repeated
# string), items for a repeated field. The validation interceptor of every service applies them.
FIELDS: dict[str, Limit] = {
    "ragmesh.answerer.v1.CheckInputRequest.question": QUESTION,
    "ragmesh.answerer.v1.CheckInputRequest.history": HISTORY_TURNS,
    "ragmesh.answerer.v1.AnswerRequest.question": QUESTION,
    "ragmesh.answerer.v1.AnswerRequest.history": HISTORY_TURNS,
    "ragmesh.answerer.v1.AnswerRequest.bridges": BRIDGES,
    "ragmesh.answerer.v1.RewriteRequest.question": QUESTION,
    "ragmesh.answerer.v1.RewriteRequest.history": HISTORY_TURNS,
    "ragmesh.answerer.v1.ChatTurn.content": TURN,
    "ragmesh.retriever.v1.SearchRequest.query": QUESTION,
    "ragmesh.retriever.v1.SearchRequest.sub_queries": SUB_QUERIES,
    "ragmesh.retriever.v1.SearchRequest.document_ids": ACCESS_CHECK_IDS,
    "ragmesh.retriever.v1.CheckDocumentAccessRequest.document_ids": ACCESS_CHECK_IDS,
    "ragmesh.retriever.v1.GetDocumentStampsRequest.document_ids": DOCUMENT_IDS,
    "ragmesh.retriever.v1.ListDocumentsRequest.content_sha256": CONTENT_HASHES,
    "ragmesh.retriever.v1.CreateOrGetDocumentRequest.title": TITLE,
    "ragmesh.retriever.v1.UpdateDocumentRequest.title": TITLE,
    "ragmesh.retriever.v1.CreateConversationRequest.title": CONVERSATION_TITLE,
    "ragmesh.retriever.v1.UpdateConversationRequest.title": CONVERSATION_TITLE,
    "ragmesh.retriever.v1.SetMessageFeedbackRequest.comment": FEEDBACK_COMMENT,
    "ragmesh.common.v1.Acl.departments": ACL_ENTRIES,
    "ragmesh.common.v1.Acl.roles": ACL_ENTRIES,
    "ragmesh.common.v1.Acl.users": ACL_ENTRIES,
    "ragmesh.graph.v1.GetContextRequest.query": QUESTION,
    "ragmesh.reranker.v1.RerankRequest.query": QUESTION,
    "ragmesh.graph.v1.GetContextRequest.document_ids": ACCESS_CHECK_IDS,
    "ragmesh.graph.v1.DeleteDocumentRequest.document_id": ID,
    "ragmesh.graph.v1.IngestChunksRequest.document_id": ID,
    "ragmesh.graph.v1.GraphChunk.chunk_id": ID,
    "ragmesh.graph.v1.RankChunksRequest.query": QUESTION,
    "ragmesh.graph.v1.RankChunksRequest.document_ids": ACCESS_CHECK_IDS,
    "ragmesh.retriever.v1.SearchRequest.graph_scores": CANDIDATES,
    "ragmesh.retriever.v1.LegScore.chunk_id": ID,
}
# Each item of these repeated string fields is also bounded (the list's own limit is in FIELDS).
ITEM_FIELDS: dict[str, Limit] = {
    "ragmesh.answerer.v1.AnswerRequest.bridges": TITLE,
    "ragmesh.retriever.v1.SearchRequest.sub_queries": QUESTION,
    "ragmesh.common.v1.Acl.departments": IDENTIFIER,
    "ragmesh.common.v1.Acl.roles": IDENTIFIER,
    "ragmesh.common.v1.Acl.users": IDENTIFIER,
}


def too_long(limit: Limit, field: str, size: int) -> str | None:
    """The message for a `size` over `limit` (None when it fits), naming the field."""
    if size <= limit.value:
        return None
    return f"{field} has {size} {limit.unit}; the limit is {limit.value} ({limit.name})"


def check_acl_names(field: str, names: Sequence[str]) -> list[str]:
    """The ACL list `names` deduplicated in order, or ValueError naming the list or the bad entry: at most
    `ACL_ENTRIES` entries, each an identifier (the same rule as a token's department and roles)."""
    problem = too_long(ACL_ENTRIES, field, len(names))
    if problem:
        raise ValueError(problem)
    for i, name in enumerate(names):
        validate_identifier(name, f"{field}[{i}]")
    return list(dict.fromkeys(names))


def markdown_table() -> str:
    """The README's limits table (README.md, section "Limits"; a test keeps the two equal)."""
    rows = ["| Limit | Value | What |", "|---|---|---|"]
    rows += [f"| {limit.name} | {limit.value:,} {limit.unit} | {limit.what} |" for limit in ALL]
    return "\n".join(rows)

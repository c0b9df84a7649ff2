"""FetchSection: a document's section by title, for its readers (the gateway agent's fetch-section tool).

A document is found by its title (any of several; whole, but case, punctuation and a trailing qualifier in
parentheses or after a comma, "Dawn Harbor (film)", "Ballina, New South Wales", aside) or by id; within it, the paragraph chunks under a heading of the section path,
or its beginning. Everything is read in one transaction as the caller, so row-level security decides which
documents exist: a document the caller cannot read (or that is not ready) is never matched.
"""

from __future__ import annotations

import uuid

from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.errors import InvalidArgument
from ragmesh_common.identity import UserContext
from ragmesh_retriever.backends.pgvector_backend import chunk_message
from ragmesh_retriever.documents import parse_document_id
from ragmesh_retriever.session import Database

DEFAULT_CHUNKS = 4
MAX_CHUNKS = 50
DEFAULT_DOCUMENTS = 3
MAX_DOCUMENTS = 10
MAX_TITLES = 50
MAX_TEXT = 500  # characters of a title or a heading
MAX_FILTER = 1000  # document ids of the caller's filter

# A title's key, as the documents.title_key column computes it (schema.sql): lower case, without a trailing
# "(...)" qualifier nor a ", ..." one ("Ballina, New South Wales" = "ballina"), every run of punctuation and spaces
# one space ("Jung Joon-young" = "jung joon young").
TITLE_KEY = (
    "btrim(regexp_replace(lower(regexp_replace(regexp_replace({}, '\\s*\\([^)]*\\)\\s*$', ''), ',.*$', '')), "
    "'[^[:alnum:]]+', ' ', 'g'))"
)

_SQL = f"""
WITH wanted AS (
    SELECT {TITLE_KEY.format("t")} AS k, min(i) AS i, min(t) AS t
    FROM unnest(%(titles)s::text[]) WITH ORDINALITY AS w(t, i) GROUP BY 1
), docs AS (
    SELECT d.id, coalesce(w.i, 0) AS i FROM documents d
    LEFT JOIN wanted w ON d.title_key = w.k
    WHERE d.status = 'ready'
      AND (CASE WHEN %(doc)s::uuid IS NULL THEN w.k IS NOT NULL ELSE d.id = %(doc)s::uuid END)
      AND (%(filter)s::uuid[] IS NULL OR d.id = ANY(%(filter)s::uuid[]))
    ORDER BY coalesce(w.i, 0), lower(d.title) = lower(coalesce(w.t, '')) DESC, d.updated_at DESC, d.id
    LIMIT %(documents)s
)
SELECT c.id, c.document_id, c.level, c.parent_id, c.ordinal, c.section_path, c.page, c.kind, c.title, c.text
FROM docs d CROSS JOIN LATERAL (
    SELECT * FROM chunks c
    WHERE c.document_id = d.id AND c.level = %(level)s
      AND (%(section)s = '' OR EXISTS (SELECT 1 FROM unnest(c.section_path) s WHERE lower(s) = lower(%(section)s)))
    ORDER BY c.ordinal, c.id
    LIMIT %(limit)s
) c
ORDER BY d.i, d.id, c.ordinal
"""


def _bounded(value: int, default: int, most: int, name: str) -> int:
    if value < 0:
        raise InvalidArgument(f"{name} must be >= 0")
    return min(value or default, most)


async def fetch_section(
    db: Database, user: UserContext, request: retriever_pb2.FetchSectionRequest
) -> retriever_pb2.FetchSectionResponse:
    """The chunks of the section asked for, in the documents the caller may read now."""
    titles = [t.strip() for t in request.titles if t.strip()]
    section = request.section.strip()
    if bool(titles) == bool(request.document_id):
        raise InvalidArgument("FetchSection takes titles or a document_id (one of them)")
    if len(titles) > MAX_TITLES:
        raise InvalidArgument(f"at most {MAX_TITLES} titles")
    if any(len(t) > MAX_TEXT for t in titles) or len(section) > MAX_TEXT:
        raise InvalidArgument(f"titles and section are at most {MAX_TEXT} characters")
    if len(request.document_ids) > MAX_FILTER:
        raise InvalidArgument(f"at most {MAX_FILTER} document_ids")
    doc = parse_document_id(request.document_id) if request.document_id else None
    filter_ids: list[uuid.UUID] | None = None
    if request.document_ids:
        filter_ids = [parse_document_id(d) for d in request.document_ids]
    params = {
        "doc": doc,
        "titles": titles,
        "section": section,
        "filter": filter_ids,
        "documents": _bounded(request.max_documents, DEFAULT_DOCUMENTS, MAX_DOCUMENTS, "max_documents"),
        "limit": _bounded(request.limit, DEFAULT_CHUNKS, MAX_CHUNKS, "limit"),
        "level": common_pb2.CHUNK_LEVEL_PARAGRAPH,
    }
    async with db.transaction(user) as conn:  # RLS: only documents and chunks the caller may read
        cur = await conn.execute(_SQL, params)
        rows = await cur.fetchall()
    reply = retriever_pb2.FetchSectionResponse(documents=len({r[1] for r in rows}))
    for row in rows:
        reply.results.add(chunk=chunk_message(row), origin=common_pb2.CHUNK_ORIGIN_SEARCH)
    return reply

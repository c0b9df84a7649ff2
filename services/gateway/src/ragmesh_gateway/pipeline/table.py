"""table: a question for a table's largest or smallest row, or for how many rows hold a value, reads the whole table,
not the chunks the search found.

"Which product had the highest revenue?" over a workbook: the sheet is split into chunks of a few rows each (the
header repeated in each), and the search gives the answer two or three of them, so the answerer's largest row was
the largest of those rows only; two chunks with different largest rows even read as documents that disagree. For a
superlative question (`ragmesh_common.text.questions.superlative`) whose sources (the first `top_k`) hold a table
chunk, each such document's section (its best-ranked table chunk's; at most `TABLE_DOCUMENTS`) is fetched from it
(FetchSection as the user: row-level security and the request's document filter decide what it returns) and the
chunks of that table (the same header line) that the sources lack are given to the answerer after them
(`RequestState.table_chunks`: sources like the others, cited by their place). At most `chunks` chunks are read
(GATEWAY_TABLE_CHUNKS, 50; 0 turns the step off): a table with more is read as far as that, and the reply's notes
say its largest row is of those read only (stage record `complete` false). A failed fetch leaves the sources as
they were (optional step: logged, traced, reported as degraded).

A how-many question (`ragmesh_common.text.questions.asks_how_many`: "How many customers are from Chile?") reads the
whole table the same way: the answerer counts the rows of the whole table that hold the value it names, not those of
the chunks the search found. When the table was read only in part, the answerer is told (`partial_tables` on the
answer request: `RequestState.tables_partial`) and says its count as a lower bound ("at least 3"), and the notes say
the count is of the rows read only.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.text.questions import asks_how_many, superlative
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.models import ChatRequest
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step


def header_of(text: str) -> str | None:
    """The first line of a chunk's Markdown table (its header; the parser repeats it in each chunk of a table)."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("|") and stripped.endswith("|") and len(stripped) > 1:
            return stripped
    return None


def reads_whole_table(question: str) -> bool:
    """A question whose answer is about all of a table's rows: its largest or smallest row ("Which product had the
    highest revenue?") or how many rows hold a value ("How many customers are from Chile?")."""
    return superlative(question) is not None or asks_how_many(question)


TABLE_DOCUMENTS = 3  # the documents whose table is read: copies of a sheet agree only when each is read whole


class WholeTable(Step):
    """table: the chunks of the table a superlative or how-many question is about join the answer's sources."""

    name = "table"
    required = False

    def __init__(self, mesh: Mesh, timeout: float, *, chunks: int = 0) -> None:
        self.mesh = mesh
        self.timeout = timeout
        self.chunks = chunks

    def applies(self, state: RequestState) -> bool:
        return state.answering and isinstance(state.request, ChatRequest) and bool(state.results) and self.chunks > 0

    async def run(self, state: RequestState) -> dict[str, Any]:
        request = state.request
        assert isinstance(request, ChatRequest)  # applies() checked it
        if not reads_whole_table(state.query):
            return {}
        given = state.results[: request.top_k]
        tables: list[tuple[common_pb2.Chunk, str]] = []  # each document's best-ranked table chunk and its header
        for item in given:
            header = header_of(item.chunk.text) if item.chunk.kind == common_pb2.CHUNK_KIND_TABLE else None
            if header is not None and all(item.chunk.document_id != seen.document_id for seen, _ in tables):
                tables.append((item.chunk, header))
        if not tables:
            return {}
        known = {r.chunk.chunk_id for r in given}
        chosen = tables[:TABLE_DOCUMENTS]
        # one fetch per document, together; any failure leaves the sources as they were (nothing assigned yet)
        replies = await asyncio.gather(*(self._fetch(state, table) for table, _ in chosen))
        same = [
            r
            for (table, header), reply in zip(chosen, replies, strict=True)
            for r in reply.results
            if r.chunk.document_id == table.document_id
            and r.chunk.kind == common_pb2.CHUNK_KIND_TABLE
            and header_of(r.chunk.text) == header
        ]
        state.table_chunks = [r for r in same if r.chunk.chunk_id not in known]
        complete = all(len(reply.results) < self.chunks for reply in replies)
        if not complete:
            state.tables_partial = True
            state.notes.append(
                f"A table has more than the {self.chunks} parts read for this answer: its largest or smallest row, "
                "or a count of its rows (at least that many), is of those read only."
            )
        return {"table_chunks": len(same), "added": len(state.table_chunks), "complete": complete}

    async def _fetch(self, state: RequestState, table: common_pb2.Chunk) -> retriever_pb2.FetchSectionResponse:
        """The section of `table`'s document that holds it, as the user reads it, at most `chunks` chunks."""
        reply: retriever_pb2.FetchSectionResponse = await self.mesh.retriever.FetchSection(
            retriever_pb2.FetchSectionRequest(
                document_id=table.document_id,
                section=table.section_path[-1] if table.section_path else "",
                document_ids=state.document_ids,
                limit=self.chunks,
                max_documents=1,
            ),
            metadata=state.user.metadata(),
            timeout=self.timeout,
        )
        return reply

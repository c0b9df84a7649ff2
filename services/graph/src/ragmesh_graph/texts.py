"""Chunk text for community reports, read from the catalogue (the retriever's ListChunks) as the caller.

The graph stores no text. A report's sentences come from the chunks it names, read through the retriever under
the caller's identity, so row-level security checks the read a second time (after the graph's own access check):
a chunk the caller cannot read comes back as no text, never as someone else's.
"""

from __future__ import annotations

import asyncio
import logging

from grpc import aio

from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.errors import Unavailable
from ragmesh_common.identity import UserContext
from ragmesh_graph.access import RetrieverClient
from ragmesh_graph.reports import ChunkText
from ragmesh_graph.store import chunk_uid

logger = logging.getLogger(__name__)

PAGE = 1000  # ListChunks' largest page
MAX_PAGES = 20  # per document: 20,000 chunks
CONCURRENCY = 8


class ChunkTexts(RetrieverClient):
    """A client of the retriever's ListChunks; one call per document (paged), a few documents at once."""

    async def _document(self, user: UserContext, document_id: str, wanted: set[str]) -> list[ChunkText]:
        found: list[ChunkText] = []
        cursor = ""
        for _ in range(MAX_PAGES):
            try:
                reply = await self._retriever().ListChunks(
                    retriever_pb2.ListChunksRequest(document_id=document_id, limit=PAGE, cursor=cursor),
                    metadata=user.metadata(),
                    timeout=self.timeout,
                )
            except aio.AioRpcError as exc:
                if exc.code().name in ("NOT_FOUND", "PERMISSION_DENIED"):
                    return []  # deleted or no longer readable since the access check: no text
                raise Unavailable(f"chunk text of {document_id}: retriever {exc.code().name}") from exc
            found += [ChunkText(document_id, c.chunk_id, c.text) for c in reply.chunks if c.chunk_id in wanted]
            if len(found) >= len(wanted) or not reply.next_cursor:
                break
            cursor = reply.next_cursor
        return found

    async def fetch(self, user: UserContext, uids: dict[str, tuple[str, str]]) -> dict[str, ChunkText]:
        """Text of the chunks `uids` names (uid -> (document id, chunk id)) that the user can read, by uid."""
        by_document: dict[str, set[str]] = {}
        for document_id, chunk_id in uids.values():
            by_document.setdefault(document_id, set()).add(chunk_id)
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(document_id: str, wanted: set[str]) -> list[ChunkText]:
            async with gate:
                return await self._document(user, document_id, wanted)

        pages = await asyncio.gather(*(one(d, w) for d, w in sorted(by_document.items())))
        return {chunk_uid(c.document_id, c.chunk_id): c for page in pages for c in page}

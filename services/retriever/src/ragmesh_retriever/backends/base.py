"""The search-backend contract every backend implements (and the shared contract tests exercise)."""
from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field, replace
from typing import Protocol

from ragmesh.common.v1 import common_pb2
from ragmesh_common.context import UserContext

RELATIVE = "relative_score"
RANKED = "ranked"
DISTRIBUTION = "distribution_based"


@dataclass(frozen=True)
class SearchQuery:
    text: str
    vector: list[float] | None
    top_k: int
    alpha: float
    fusion: str = RELATIVE
    levels: list[int] = field(default_factory=lambda: [common_pb2.CHUNK_LEVEL_PARAGRAPH])
    candidates: int = 100
    language: str = ""
    feedback_docs: int = 0        # vector pseudo-relevance feedback (Rocchio); 0 = off
    feedback_weight: float = 1.0
    # a query vector still being computed (the retriever embeds the query itself): a backend may start
    # everything that does not need it first; None when it could not be had (lexical only)
    pending_vector: Awaitable[list[float] | None] | None = field(default=None, compare=False, repr=False)

    async def resolved(self) -> SearchQuery:
        """This query with its vector in place (waits for a pending one); alpha 0 when there is none."""
        if self.pending_vector is None:
            return self
        vector = await self.pending_vector
        return replace(self, vector=vector, pending_vector=None, alpha=self.alpha if vector else 0.0)


@dataclass(frozen=True)
class Hit:
    chunk: common_pb2.Chunk
    hybrid: float
    lexical: float | None
    vector: float | None


class SearchBackend(Protocol):
    name: str

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def index(self, user: UserContext, document_id: str, chunks: list[common_pb2.Chunk]) -> int:
        """Replaces the document's chunks; the caller must own the document."""

    async def delete(self, user: UserContext, document_id: str) -> None:
        """Removes the document's chunks (the catalogue row is removed by the catalogue)."""

    async def search(self, user: UserContext, query: SearchQuery, accessible_ids: list[str]) -> list[Hit]:
        """Hybrid search restricted to `accessible_ids` (already decided by RLS); best first."""

    async def get_chunks(self, user: UserContext, chunk_ids: list[str], accessible_ids: list[str]) -> list[common_pb2.Chunk]:
        """Chunks by id, only from accessible documents."""

    async def document_chunks(self, user: UserContext, document_ids: list[str], levels: list[int]) -> list[common_pb2.Chunk]:
        """All chunks of the given (accessible) documents at these levels, in document order."""


# Chunk kinds are stored as their lower-case names ("paragraph", "summary", ...), the enum in the contract.
_KIND_VALUES = {name.removeprefix("CHUNK_KIND_").lower(): value for name, value in common_pb2.ChunkKind.items() if value}


def kind_name(kind: int) -> str:
    """The stored name of a chunk kind; an unset kind is stored as a paragraph."""
    return common_pb2.ChunkKind.Name(kind or common_pb2.CHUNK_KIND_PARAGRAPH).removeprefix("CHUNK_KIND_").lower()


def kind_value(name: str) -> common_pb2.ChunkKind.ValueType:
    """The contract's kind for a stored name (unspecified for a name it does not know)."""
    return _KIND_VALUES.get(name, common_pb2.CHUNK_KIND_UNSPECIFIED)

"""The search-backend contract every backend implements (and the shared contract tests exercise)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ragmesh.common.v1 import common_pb2
from ragmesh_common.identity import UserContext
from ragmesh_retriever.ranking import Fusion


@dataclass(frozen=True)
class SearchQuery:
    text: str
    vector: list[float] | None
    top_k: int
    alpha: float
    fusion: Fusion = Fusion.RELATIVE_SCORE
    levels: list[int] = field(default_factory=lambda: [common_pb2.CHUNK_LEVEL_PARAGRAPH])
    candidates: int = 100
    # the lexical leg's languages, the query's own first (analysis.choose_languages); empty = detected
    languages: tuple[str, ...] = ()
    feedback_docs: int = 0  # vector pseudo-relevance feedback (Rocchio); 0 = off
    feedback_weight: float = 1.0
    graph: dict[str, float] = field(default_factory=dict)  # the graph leg: chunk id → score; empty = none
    graph_weight: float = 0.0


@dataclass(frozen=True)
class Scope:
    """The ready documents a search may read: their ids, or, when there are more than the catalogue lists
    (`document_ids` None), just how many; the backend then filters by the user's readable ACL scopes, which
    the database decides under row-level security (pgvector only: `SearchBackend.scope_list_max`)."""

    documents: int
    document_ids: list[str] | None

    @classmethod
    def of(cls, ids: Sequence[str] | Scope) -> Scope:
        """A scope of exactly these documents (a scope is returned as it is)."""
        return ids if isinstance(ids, Scope) else cls(len(ids), list(ids))

    def __bool__(self) -> bool:
        return self.documents > 0


@dataclass(frozen=True)
class Hit:
    chunk: common_pb2.Chunk
    hybrid: float
    lexical: float | None
    vector: float | None


class SearchBackend(Protocol):
    name: str
    fusions: frozenset[Fusion]  # the fusions `search` offers
    # True: chunks live in the catalogue's database under its row-level security, so `index` itself refuses a
    # caller who does not own the document and the chunks go with the catalogue row; False: the retriever
    # checks ownership before `index` and calls `delete` before removing the catalogue row.
    shares_catalogue: bool
    # How many readable documents a search lists by id at most; a larger scope is searched by ACL scope
    # (`Scope.document_ids` None). None: always listed (the backend filters by id).
    scope_list_max: int | None

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def index(self, user: UserContext, document_id: str, chunks: list[common_pb2.Chunk], version: int = 0) -> int:
        """Replaces the document's chunks; the caller must own the document. pgvector: for a pending `version`
        (0 = the pending one, if any) the swap to it is in the same transaction (catalog.lock_version)."""

    async def delete(self, user: UserContext, document_id: str) -> None:
        """Removes the document's chunks (the catalogue row is removed by the catalogue)."""

    async def lexical(
        self, user: UserContext, query: SearchQuery, accessible: Sequence[str] | Scope
    ) -> Mapping[str, float] | None:
        """The lexical leg alone (chunk id → score), which needs no query vector: the retriever runs it while
        the query is being embedded and hands it to `search`. None: the backend scores both legs in `search`."""

    async def search(
        self,
        user: UserContext,
        query: SearchQuery,
        accessible: Sequence[str] | Scope,
        lexical: Mapping[str, float] | None = None,
    ) -> list[Hit]:
        """Hybrid search restricted to `accessible` (already decided by RLS: ids, or a Scope); best first. `lexical`: this
        query's lexical leg from `lexical`, when the caller ran it already."""

    async def document_chunks(
        self, user: UserContext, document_ids: list[str], levels: list[int]
    ) -> list[common_pb2.Chunk]:
        """All chunks of the given (accessible) documents at these levels, in document order."""


# Chunk kinds are stored as their lower-case names ("paragraph", "summary", ...), the enum in the contract.
_KIND_VALUES = {
    name.removeprefix("CHUNK_KIND_").lower(): value for name, value in common_pb2.ChunkKind.items() if value
}


def kind_name(kind: common_pb2.ChunkKind.ValueType) -> str:
    """The stored name of a chunk kind; an unset kind is stored as a paragraph."""
    return common_pb2.ChunkKind.Name(kind or common_pb2.CHUNK_KIND_PARAGRAPH).removeprefix("CHUNK_KIND_").lower()


def kind_value(name: str) -> common_pb2.ChunkKind.ValueType:
    """The contract's kind for a stored name (unspecified for a name it does not know)."""
    return _KIND_VALUES.get(name, common_pb2.CHUNK_KIND_UNSPECIFIED)

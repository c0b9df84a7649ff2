"""The production backend: Weaviate through weaviate-client v4 (collections API, async client).

Chunks live in one collection with self-provided vectors; the document catalogue and its ACLs stay
in PostgreSQL under RLS, which decides the accessible document ids that every query filters on.
Search is Weaviate's native hybrid query (alpha, relativeScoreFusion or rankedFusion); BM25 k1 and b are
set when the collection is created (Weaviate keeps them per collection), the heading weight per query.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlparse

import weaviate
from weaviate.classes.config import Configure, DataType, Property, Tokenization
from weaviate.classes.init import AdditionalConfig, Auth, Timeout
from weaviate.classes.query import Filter, HybridFusion, MetadataQuery

from ragmesh.common.v1 import common_pb2
from ragmesh_common.errors import InvalidArgument
from ragmesh_common.identity import UserContext
from ragmesh_retriever.backends.base import Hit, SearchQuery, kind_name, kind_value
from ragmesh_retriever.ranking import Fusion, fuse

if TYPE_CHECKING:
    from weaviate.collections import CollectionAsync
    from weaviate.collections.classes.filters import _Filters

logger = logging.getLogger(__name__)

_PROPS = ["chunk_id", "document_id", "level", "parent_id", "ordinal", "section_path", "page", "kind", "title", "text"]
_NAMESPACE = uuid.UUID("6f1c9a52-7f0e-4a7e-9b3c-2b1f0e9d4a10")


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


# Weaviate fuses natively; distribution-based fusion it does not offer
_FUSIONS = {Fusion.RELATIVE_SCORE: HybridFusion.RELATIVE_SCORE, Fusion.RANKED: HybridFusion.RANKED}


class WeaviateBackend:
    name = "weaviate"
    fusions = frozenset(_FUSIONS)
    shares_catalogue = False  # chunks in Weaviate: the retriever checks ownership and deletes them itself

    def __init__(
        self,
        url: str,
        *,
        grpc_port: int = 50051,
        api_key: str | None = None,
        collection: str = "RagmeshChunk",
        timeout_s: float = 10.0,
        k1: float = 0.9,
        b: float = 0.4,
        heading_weight: float = 1.0,
    ) -> None:
        parsed = urlparse(url)
        if not parsed.hostname:
            raise ValueError(f"WEAVIATE_URL must look like http://host:8080, got {url!r}")
        secure = parsed.scheme == "https"
        self.client = weaviate.use_async_with_custom(
            http_host=parsed.hostname,
            http_port=parsed.port or (443 if secure else 80),
            http_secure=secure,
            grpc_host=parsed.hostname,
            grpc_port=grpc_port,
            grpc_secure=secure,
            auth_credentials=Auth.api_key(api_key) if api_key else None,
            additional_config=AdditionalConfig(timeout=Timeout(init=timeout_s, query=timeout_s, insert=timeout_s * 6)),
        )
        self.collection_name = collection
        self.k1, self.b = k1, b
        # the same field weighting as the pgvector backend's BM25: title and section path `heading_weight`×
        boost = f"^{heading_weight:g}" if heading_weight != 1 else ""
        self.query_properties = [f"title{boost}", f"section_path{boost}", "text"]

    async def start(self) -> None:
        await self.client.connect()
        if not await self.client.collections.exists(self.collection_name):
            await self.client.collections.create(
                self.collection_name,
                vector_config=Configure.Vectors.self_provided(),
                inverted_index_config=Configure.inverted_index(bm25_k1=self.k1, bm25_b=self.b),
                properties=[
                    Property(
                        name="chunk_id",
                        data_type=DataType.TEXT,
                        tokenization=Tokenization.FIELD,
                        skip_vectorization=True,
                    ),
                    Property(name="document_id", data_type=DataType.TEXT, tokenization=Tokenization.FIELD),
                    Property(name="level", data_type=DataType.INT),
                    Property(name="parent_id", data_type=DataType.TEXT, tokenization=Tokenization.FIELD),
                    Property(name="ordinal", data_type=DataType.INT),
                    Property(name="section_path", data_type=DataType.TEXT_ARRAY),
                    Property(name="page", data_type=DataType.INT),
                    Property(name="kind", data_type=DataType.TEXT, tokenization=Tokenization.FIELD),
                    Property(name="title", data_type=DataType.TEXT),
                    Property(name="text", data_type=DataType.TEXT),
                ],
            )
            logger.info("created Weaviate collection %s", self.collection_name)

    async def close(self) -> None:
        await self.client.close()

    def _collection(self) -> CollectionAsync[Any, Any]:
        return self.client.collections.use(self.collection_name)

    async def index(
        self, user: UserContext, document_id: str, chunks: list[common_pb2.Chunk], version: int = 0
    ) -> int:  # the version swap is the server's (catalog), after this
        for i, chunk in enumerate(chunks):
            if not chunk.chunk_id:
                raise InvalidArgument(f"chunk {i} has no chunk_id")
        await self.delete(user, document_id)
        from weaviate.classes.data import DataObject

        objects = [
            DataObject(
                uuid=uuid.uuid5(_NAMESPACE, c.chunk_id),
                properties={
                    "chunk_id": c.chunk_id,
                    "document_id": document_id,
                    "level": c.level or common_pb2.CHUNK_LEVEL_PARAGRAPH,
                    "parent_id": c.parent_id,
                    "ordinal": c.ordinal,
                    "section_path": list(c.section_path),
                    "page": c.page,
                    "kind": kind_name(c.kind),
                    "title": c.title,
                    "text": c.text,
                },
                vector=list(c.embedding) if c.embedding else None,
            )
            for c in chunks
        ]
        if objects:
            result = await self._collection().data.insert_many(objects)
            if result.has_errors:
                first = next(iter(result.errors.values()))
                raise RuntimeError(f"Weaviate rejected {len(result.errors)} chunks: {first.message}")
        return len(objects)

    async def delete(self, user: UserContext, document_id: str) -> None:
        await self._collection().data.delete_many(where=Filter.by_property("document_id").equal(document_id))

    def _filters(self, accessible_ids: list[str], levels: list[int]) -> _Filters:
        return Filter.by_property("document_id").contains_any(accessible_ids) & Filter.by_property(
            "level"
        ).contains_any(levels)

    async def lexical(self, user: UserContext, query: SearchQuery, accessible_ids: list[str]) -> None:
        return None  # one native hybrid query scores both legs: it needs the vector up front

    async def search(
        self,
        user: UserContext,
        query: SearchQuery,
        accessible_ids: list[str],
        lexical: Mapping[str, float] | None = None,
    ) -> list[Hit]:
        if not accessible_ids:
            return []
        fusion = _FUSIONS[query.fusion]  # the retriever refuses a fusion not in `fusions`
        reply = await self._collection().query.hybrid(
            query=query.text or None,
            vector=query.vector or None,
            alpha=query.alpha if query.vector else 0.0,
            fusion_type=fusion,
            limit=query.top_k,
            filters=self._filters(accessible_ids, query.levels),
            query_properties=self.query_properties,
            include_vector=bool(query.vector),
            return_metadata=MetadataQuery(score=True),
            return_properties=_PROPS,
        )
        hits = []
        for obj in reply.objects:
            chunk = self._chunk(obj.properties)
            stored = obj.vector.get("default") if isinstance(obj.vector, dict) else None
            # one named vector ("default"), never a multi-vector: the collection is created with a single one
            sim = _cosine(query.vector, cast("list[float]", stored)) if query.vector and stored else None
            hits.append(Hit(chunk=chunk, hybrid=float(obj.metadata.score or 0.0), lexical=None, vector=sim))
        if query.graph and query.graph_weight > 0 and hits:
            # the native hybrid query cannot take a third leg: the graph leg re-orders its hits (the hybrid score
            # as one leg), and a chunk only the graph found is not added on this backend
            by_id = {h.chunk.chunk_id: h for h in hits}
            fused = fuse(
                query.fusion, {}, {k: h.hybrid for k, h in by_id.items()}, 1.0, query.graph, query.graph_weight
            )
            hits = [replace(by_id[f.chunk_id], hybrid=f.score) for f in fused if f.chunk_id in by_id]
        return hits

    async def document_chunks(
        self, user: UserContext, document_ids: list[str], levels: list[int]
    ) -> list[common_pb2.Chunk]:
        if not document_ids:
            return []
        reply = await self._collection().query.fetch_objects(
            filters=self._filters(document_ids, levels), limit=5000, return_properties=_PROPS
        )
        chunks = [self._chunk(o.properties) for o in reply.objects]
        return sorted(chunks, key=lambda c: (c.document_id, c.ordinal))

    @staticmethod
    def _chunk(p: Mapping[str, Any]) -> common_pb2.Chunk:
        return common_pb2.Chunk(
            chunk_id=str(p.get("chunk_id", "")),
            document_id=str(p.get("document_id", "")),
            level=common_pb2.ChunkLevel.ValueType(int(p.get("level") or 0)),
            parent_id=str(p.get("parent_id") or ""),
            ordinal=int(p.get("ordinal") or 0),
            section_path=list(p.get("section_path") or []),
            page=int(p.get("page") or 0),
            kind=kind_value(str(p.get("kind") or "")),
            title=str(p.get("title") or ""),
            text=str(p.get("text") or ""),
        )

"""Which documents the caller may read or owns, as the catalogue decides (PostgreSQL row-level security).

The graph keeps no ACLs of its own: it asks the retriever (`CheckDocumentAccess`), forwarding the caller's
internal identity token, so the answer is the catalogue's for that user and nobody else's. Nothing is kept
between requests: an ACL change, a new version or a deletion holds for the very next graph read. (A cache of
these answers served a revoked document's entities and relations for its lifetime; one check costs about a
millisecond against the retriever, see the graph README.) Within one request the graph asks each document
once (store.context). When the retriever cannot answer, the check fails and the caller gets no graph data
(fail closed).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from grpc import aio

from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from ragmesh_common.errors import Unavailable
from ragmesh_common.identity import UserContext
from ragmesh_common.server import mesh_channel

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Access:
    readable: frozenset[str]
    owned: frozenset[str]


class AccessUnavailable(Unavailable):
    """The catalogue could not be asked; no graph data is given or changed."""


class RetrieverClient:
    """A lazily opened channel to the retriever (the catalogue), as the graph service's own clients share it."""

    def __init__(self, retriever_addr: str, *, timeout: float = 5.0) -> None:
        self.addr = retriever_addr
        self.timeout = timeout
        self._channel: aio.Channel | None = None
        self._stub: retriever_pb2_grpc.RetrieverServiceAsyncStub | None = None

    def _retriever(self) -> retriever_pb2_grpc.RetrieverServiceAsyncStub:
        if self._stub is None:
            self._channel = mesh_channel(self.addr)
            self._stub = retriever_pb2_grpc.RetrieverServiceStub(self._channel)
        return self._stub

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close(grace=None)
            self._channel = self._stub = None


class DocumentAccess(RetrieverClient):
    """A client of the retriever's CheckDocumentAccess; every check asks the catalogue."""

    async def check(self, user: UserContext, document_ids: Iterable[str]) -> Access:
        """The subset of `document_ids` the user may read (ready documents) and the subset the user owns, now."""
        wanted = sorted(set(document_ids))
        if not wanted:
            return Access(frozenset(), frozenset())
        try:
            reply = await self._retriever().CheckDocumentAccess(
                retriever_pb2.CheckDocumentAccessRequest(document_ids=wanted),
                metadata=user.metadata(),
                timeout=self.timeout,
            )
        except aio.AioRpcError as exc:
            raise AccessUnavailable(
                f"document access check failed: retriever {exc.code().name} ({exc.details() or 'no detail'})"
            ) from exc
        asked = set(wanted)
        return Access(frozenset(asked & set(reply.readable_ids)), frozenset(asked & set(reply.owned_ids)))

"""Which documents the caller may read or owns, as the catalogue decides (PostgreSQL row-level security).

The graph keeps no ACLs of its own: it asks the retriever (`CheckDocumentAccess`), forwarding the caller's
internal identity token, so the answer is the catalogue's for that user and nobody else's. Answers are kept
for a few seconds per token (a chat turn asks about the same documents the search just read); an ACL change
or a deletion therefore reaches the graph within `cache_seconds`. When the retriever cannot answer, the check
fails and the caller gets no graph data (fail closed).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
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


class DocumentAccess:
    """A client of the retriever's CheckDocumentAccess with a short per-token cache."""

    def __init__(
        self,
        retriever_addr: str,
        *,
        timeout: float = 5.0,
        cache_seconds: float = 5.0,
        cache_tokens: int = 256,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.addr = retriever_addr
        self.timeout = timeout
        self.cache_seconds = cache_seconds
        self._cache_tokens = cache_tokens
        self._clock = clock
        self._channel: aio.Channel | None = None
        self._stub: retriever_pb2_grpc.RetrieverServiceAsyncStub | None = None
        # token -> (valid until, {document id: (readable, owned)})
        self._cache: OrderedDict[str, tuple[float, dict[str, tuple[bool, bool]]]] = OrderedDict()

    def _retriever(self) -> retriever_pb2_grpc.RetrieverServiceAsyncStub:
        if self._stub is None:
            self._channel = mesh_channel(self.addr)
            self._stub = retriever_pb2_grpc.RetrieverServiceStub(self._channel)
        return self._stub

    async def check(self, user: UserContext, document_ids: Iterable[str]) -> Access:
        """The subset of `document_ids` the user may read (ready documents) and the subset the user owns."""
        wanted = set(document_ids)
        if not wanted:
            return Access(frozenset(), frozenset())
        now = self._clock()
        entry = self._cache.get(user.token) if user.token and self.cache_seconds > 0 else None
        known: dict[str, tuple[bool, bool]] = entry[1] if entry is not None and now < entry[0] else {}
        missing = [d for d in wanted if d not in known]
        if missing:
            try:
                reply = await self._retriever().CheckDocumentAccess(
                    retriever_pb2.CheckDocumentAccessRequest(document_ids=missing),
                    metadata=user.metadata(),
                    timeout=self.timeout,
                )
            except aio.AioRpcError as exc:
                raise AccessUnavailable(
                    f"document access check failed: retriever {exc.code().name} ({exc.details() or 'no detail'})"
                ) from exc
            readable, owned = set(reply.readable_ids), set(reply.owned_ids)
            fresh = {d: (d in readable, d in owned) for d in missing}
            if user.token and self.cache_seconds > 0:
                if known:
                    known.update(fresh)
                else:
                    known = fresh
                    self._cache[user.token] = (now + self.cache_seconds, known)
                self._cache.move_to_end(user.token)
                while len(self._cache) > self._cache_tokens:
                    self._cache.popitem(last=False)
            else:
                known = fresh
        return Access(frozenset(d for d in wanted if known[d][0]), frozenset(d for d in wanted if known[d][1]))

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close(grace=None)
            self._channel = self._stub = None

"""distinct: the sources given to the answer say one thing once.

A short document's paragraph, its section and the document's own chunk can all match a question, each the same
text under its headings: asked "How many monthly active users are there?" over a one-slide summary, three of the
five sources were that one text (the answer cited [1, 2, 3], the sources list showed one slide three times).
Before the answer, a source that restates (`ragmesh_common.text.words.restates`: its words, numbers included, all
among another's but for a few) a better-ranked source of the same document at another level (paragraph, section,
document) is left out, and the next candidate takes its place. Copies in other documents stay: each is a source of
its own. Rank order is kept.
"""

from __future__ import annotations

from typing import Any

from ragmesh.common.v1 import common_pb2
from ragmesh_common.text.words import restates, word_set
from ragmesh_gateway.models import ChatRequest
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step


class Distinct(Step):
    """distinct: sources that restate a better-ranked one of their document (another level of it) are left out
    before the answer."""

    name = "distinct"

    def applies(self, state: RequestState) -> bool:
        return state.answering and isinstance(state.request, ChatRequest) and len(state.results) > 1

    async def run(self, state: RequestState) -> dict[str, Any]:
        kept: list[common_pb2.ScoredChunk] = []
        said: list[tuple[str, int, frozenset[str]]] = []
        dropped = 0
        for item in state.results:
            chunk, mine = item.chunk, word_set(item.chunk.text)
            if any(
                doc == chunk.document_id and level != chunk.level and restates(mine, theirs)
                for doc, level, theirs in said
            ):
                dropped += 1
                continue
            kept.append(item)
            said.append((chunk.document_id, chunk.level, mine))
        state.results[:] = kept
        return {"dropped": dropped} if dropped else {}

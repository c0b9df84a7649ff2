"""link: the documents the best evidence names, brought in right after it.

A question often needs a passage that shares few of its words: the document about an entity that the best
passage names ("… worked with the mayor Rudy Giuliani" → the document titled "Rudy Giuliani"; a policy that
says "see the Travel Policy" → that policy). After the grade, the names the question and its top
`GATEWAY_LINK_PASSAGES` passages give (the entity spotter) are looked up as document titles with the retriever's
FetchSection (case, punctuation and a trailing qualifier aside, as the user: row-level security decides which
documents exist); up to `linked_documents` (request, else `GATEWAY_LINKED_DOCUMENTS`) of them go right after
those passages. A name that titles several readable documents links none of them (it says which document no
better than the search did), and a document already among the top passages is not linked again. A linked
document the search had ranked lower moves up with its own best chunk; one it had not found comes with its
beginning. Optional: a failed lookup degrades to the search's own ranking (logged, traced, reported).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from opentelemetry import trace

from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common import attributes as attr
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step
from ragmesh_gateway.pipeline.tools import names_in, title_key

LINK_TITLES = 16  # titles looked up in one call
MIN_KEY = 3  # shorter title keys ("us", "uk") name too many things to be a link
AMBIGUITY_PROBE = 4  # documents asked for beyond those wanted, to see a title that several documents share


class Link(Step):
    name = "link"
    span = "linked documents"
    required = False

    def __init__(self, mesh: Mesh, timeout: float, *, default: int = 0, passages: int = 2) -> None:
        self.mesh = mesh
        self.timeout = timeout
        self.default = default
        self.passages = passages

    def wanted(self, state: RequestState) -> int:
        asked = getattr(state.request, "linked_documents", None)
        return self.default if asked is None else asked

    def applies(self, state: RequestState) -> bool:
        return state.answering and bool(state.results) and self.wanted(state) > 0

    async def run(self, state: RequestState) -> dict[str, Any]:
        wanted = self.wanted(state)
        top = state.results[: self.passages]
        have = {title_key(r.chunk.title) for r in top}
        by_key: dict[str, str] = {}  # one name per title key, the first given
        for name in [*names_in(state.query), *(n for r in top for n in names_in(r.chunk.text))]:
            by_key.setdefault(title_key(name), name)
        titles = [n for key, n in by_key.items() if len(key) >= MIN_KEY and key not in have][:LINK_TITLES]
        if not titles:
            return {"linked": 0, "titles": 0}
        reply = await self.mesh.retriever.FetchSection(
            retriever_pb2.FetchSectionRequest(
                titles=titles,
                document_ids=state.document_ids,
                limit=1,
                max_documents=min(10, wanted + AMBIGUITY_PROBE),
            ),
            metadata=state.user.metadata(),
            timeout=self.timeout,
        )
        linked = linked_documents(list(reply.results), {r.chunk.document_id for r in top}, wanted)
        state.results = place(state.results, linked, self.passages)
        trace.get_current_span().set_attribute(attr.RAG_SEARCH_LINKED, len(linked))
        return {"linked": len(linked), "titles": len(titles)}


def linked_documents(
    fetched: list[common_pb2.ScoredChunk], excluded: set[str], wanted: int
) -> list[common_pb2.ScoredChunk]:
    """The first chunk of each fetched document, in the order of the titles they match, without the documents
    of a title several of them share and those `excluded`; at most `wanted`."""
    documents: dict[str, set[str]] = defaultdict(set)
    for item in fetched:
        documents[title_key(item.chunk.title)].add(item.chunk.document_id)
    out: list[common_pb2.ScoredChunk] = []
    seen: set[str] = set()
    for item in fetched:
        doc = item.chunk.document_id
        if doc in seen or doc in excluded or len(documents[title_key(item.chunk.title)]) > 1:
            continue
        seen.add(doc)
        out.append(item)
    return out[:wanted]


def place(
    results: list[common_pb2.ScoredChunk], linked: list[common_pb2.ScoredChunk], after: int
) -> list[common_pb2.ScoredChunk]:
    """`results` with the linked documents right after the first `after`: a document already ranked lower moves
    up with its best chunk, one not found comes with the chunk fetched (scored as the passage before it)."""
    if not linked:
        return results
    head, tail = list(results[:after]), list(results[after:])
    floor = head[-1].score if head else 0.0
    moved: list[common_pb2.ScoredChunk] = []
    for item in linked:
        doc = item.chunk.document_id
        ranked = next((r for r in tail if r.chunk.document_id == doc), None)
        if ranked is not None:
            tail.remove(ranked)
        chosen = common_pb2.ScoredChunk()
        chosen.CopyFrom(ranked if ranked is not None else item)
        chosen.score = max(chosen.score, floor)
        moved.append(chosen)
    return head + moved + tail

"""Query understanding for the gateway, by rules (no model, well under a millisecond per question).

- `route(question) -> Route`: kind, entities, multi-hop flag, strategy, chunk levels, graph use, sub-queries.
- `rewrite_followup(question, history) -> Rewrite`: make a follow-up self-contained from the chat history;
  `arewrite_followup(..., llm=..., timeout=...)` adds an LLM fallback for references the rules cannot resolve.
- `extract_entities(text)`: the rule-based entity spotter both use (`ragmesh_common.text.entities`).
"""

from ragmesh_common.text.entities import extract_entities
from ragmesh_gateway.query.rewrite import Rewrite, arewrite_followup, rewrite_followup
from ragmesh_gateway.query.router import KINDS, Route, route

__all__ = ["KINDS", "Rewrite", "Route", "arewrite_followup", "extract_entities", "rewrite_followup", "route"]

"""The one table of limits (ragmesh_common.limits) is what the README shows, what the gRPC request check applies
(every field it names exists in the protos) and what the HTTP API's schema declares."""

from __future__ import annotations

import re
from pathlib import Path

from google.protobuf import descriptor_pool

import ragmesh.answerer.v1.answerer_pb2
import ragmesh.graph.v1.graph_pb2
import ragmesh.reranker.v1.reranker_pb2
import ragmesh.retriever.v1.retriever_pb2  # noqa: F401 - registers the descriptors the table names
from ragmesh_common import limits

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_table_is_the_module() -> None:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"<!-- limits table:[^\n]*-->\n(.*?)\n<!-- end of limits table -->", text, re.S)
    assert found, "README.md lost its limits table markers"
    assert found.group(1) == limits.markdown_table(), (
        "README.md's limits table differs from ragmesh_common.limits; paste markdown_table()'s output"
    )


def test_every_limited_grpc_field_exists_with_the_right_shape() -> None:
    pool = descriptor_pool.Default()
    for table, item_limits in ((limits.FIELDS, False), (limits.ITEM_FIELDS, True)):
        for name, limit in table.items():
            field = pool.FindFieldByName(name)  # KeyError: a renamed or removed field
            repeated = field.label == field.LABEL_REPEATED
            if item_limits or not repeated:
                assert field.type == field.TYPE_STRING and limit.unit == "characters", name
            else:
                assert limit.unit == "items", name


def test_the_http_schema_declares_the_same_numbers() -> None:
    from ragmesh_gateway.models import AclIn, ChatRequest, DocumentPatch, SearchRequest, Turn

    def bound(model: type, field: str, key: str) -> int:
        schema = model.model_json_schema()["properties"][field]  # type: ignore[attr-defined]
        options = [schema, *schema.get("anyOf", [])]
        return next(int(o[key]) for o in options if key in o)

    assert bound(ChatRequest, "question", "maxLength") == limits.QUESTION.value
    assert bound(SearchRequest, "query", "maxLength") == limits.QUESTION.value
    assert bound(ChatRequest, "history", "maxItems") == limits.HISTORY_TURNS.value
    assert bound(Turn, "content", "maxLength") == limits.TURN.value
    assert bound(ChatRequest, "top_k", "maximum") == limits.CHAT_TOP_K.value
    assert bound(SearchRequest, "top_k", "maximum") == limits.SEARCH_TOP_K.value
    assert bound(ChatRequest, "document_ids", "maxItems") == limits.DOCUMENT_IDS.value
    assert bound(DocumentPatch, "title", "maxLength") == limits.TITLE.value
    assert bound(AclIn, "users", "maxItems") == limits.ACL_ENTRIES.value

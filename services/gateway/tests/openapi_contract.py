"""Checks a live reply against the API's own OpenAPI document (GET /openapi.json), strictly: every object the
spec describes must declare every field the reply has (the spec's `additionalProperties: true` is read as
false here), so a field the code sends but the models leave out fails the check. Used by the gateway's
contract tests and by the end-to-end ones (tests/e2e/test_api_contract_e2e.py)."""

from __future__ import annotations

import copy
from typing import Any

from jsonschema import Draft202012Validator

CHAT = ("/api/v1/chat", "post")


def _strict(node: Any) -> Any:
    if isinstance(node, dict):
        node = {key: _strict(value) for key, value in node.items()}
        if "properties" in node:
            node["additionalProperties"] = False
        return node
    if isinstance(node, list):
        return [_strict(item) for item in node]
    return node


def problems(spec: dict[str, Any], schema: dict[str, Any], instance: Any) -> list[str]:
    """What in `instance` the spec's `schema` (usually a $ref into components) does not allow."""
    root = {"components": _strict(copy.deepcopy(spec["components"])), **schema}
    validator = Draft202012Validator(root)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(instance)]


def response_schema(spec: dict[str, Any], path: str, method: str, media: str = "application/json") -> dict[str, Any]:
    schema: dict[str, Any] = spec["paths"][path][method]["responses"]["200"]["content"][media]["schema"]
    return schema


def event_schema(spec: dict[str, Any], name: str) -> dict[str, Any]:
    """The schema of an SSE event's data, as the chat's text/event-stream schema declares it for `name`."""
    stream = response_schema(spec, *CHAT, media="text/event-stream")
    for option in stream["oneOf"]:
        if name in option["properties"]["event"]["enum"]:
            data: dict[str, Any] = option["properties"]["data"]["contentSchema"]
            return data
    raise AssertionError(f"the spec declares no chat event {name!r}")


def stream_problems(spec: dict[str, Any], events: list[tuple[str, Any]]) -> list[str]:
    found = []
    for i, (name, data) in enumerate(events):
        found += [f"event {i} ({name}) {p}" for p in problems(spec, event_schema(spec, name), data)]
    return found

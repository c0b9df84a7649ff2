"""A question asking what something is, answered from the passage that says it although the search ranks other
passages about it higher (the gateway's define step): found using the product, "What is TableFormer?" over the
TableFormer paper was withheld because every top passage named TableFormer and none said what it is."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ragmesh_dev.devstack import Stack

from .conftest import auth, uploaded_ready

pytestmark = pytest.mark.e2e

RESULTS = "\n\n".join(
    f"## Quillex run {n}\n\nQuillex finished run {n} of the Quillex benchmark in {40 + n} minutes; Quillex kept "
    f"{90 - n} percent of the Quillex queue busy while Quillex retried {n} Quillex jobs."
    for n in range(1, 9)
)
DOCUMENT = (
    f"# Quillex notes\n\n{RESULTS}\n\n## Background\n\n"
    "The shared clusters of the institute grew from four racks in 2015 to forty in 2024, and their users "
    "waited ever longer for their turn. Operators tried priority queues, fair-share accounting and reserved "
    "nodes for urgent work; each helped for a while and then the waiting came back. "
    "We introduce Quillex, a lightweight scheduler for batch jobs on shared clusters. "
    "The rest of these notes describes the hardware the measurements ran on, the storage and network layout of "
    "the racks, and the accounting rules of the institute that the measurements had to respect.\n"
).encode()


@pytest.fixture(scope="module")
def token(mesh: Stack, client: httpx.Client) -> str:
    token = mesh.token("dora", "definitions", ["employee"])
    uploaded_ready(client, token, "quillex.md", DOCUMENT)
    return token


def chat(client: httpx.Client, token: str, question: str) -> dict[str, Any]:
    reply = client.post("/api/v1/chat", headers=auth(token), json={"question": question, "cache": False})
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def test_what_a_term_is_is_answered_from_the_passage_that_defines_it(client: httpx.Client, token: str) -> None:
    final = chat(client, token, "What is Quillex?")
    define = next(p for p in final["progress"] if p.get("stage") == "define" and p.get("status") == "done")
    assert define["term"] == "Quillex"
    assert define.get("promoted_from", 0) > 5, define  # the search put five other passages first
    assert final["verified"] is True and final["withheld"] is False, final
    assert final["short_answer"] == "lightweight scheduler for batch jobs on shared clusters", final
    assert "We introduce Quillex" in final["answer_span"]["quote"]

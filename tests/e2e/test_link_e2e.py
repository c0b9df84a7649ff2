"""Linked documents against the real mesh (gateway `link` → retriever FetchSection under row-level security): the
document a search's best passage names joins the results right after it only while the user may read it, and
follows an ACL change and a deletion at the next search."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ragmesh_dev.devstack import Stack

from .conftest import auth, uploaded_ready

pytestmark = pytest.mark.e2e

MILL = "# Harrow Mill\n\nHarrow Mill is a 1958 drama film directed by Ione Brask, set at a paper mill on a river.\n"
BRASK = "# Ione Brask\n\nIone Brask was born in 1921 and later taught at a conservatory in Vell.\n"
QUESTION = "Which film is set at a paper mill on a river?"
# about mills and rivers, nearer the question than the director's page: without the link it is not in the top 3
OTHERS = [
    "An old paper mill stands on the river Tay near Corran.",
    "Mill towns grew up along rivers in the nineteenth century.",
    "A river drives the wheel of a grain mill.",
    "Paper is made from wood pulp at a mill.",
]


@pytest.fixture(scope="module")
def tokens(mesh: Stack) -> dict[str, str]:
    return {
        "ada": mesh.token("ada-link", "research", ["employee"]),
        "bob": mesh.token("bob-link", "legal", ["employee"]),
    }


def add(client: httpx.Client, token: str, name: str, title: str, text: str, departments: list[str]) -> str:
    return uploaded_ready(client, token, f"link-{name}.md", text.encode(), {"departments": departments}, title)


def found(client: httpx.Client, token: str, linked: int = 1) -> list[str]:
    body: dict[str, Any] = {"query": QUESTION, "top_k": 5, "linked_documents": linked, "relevance_gate": False}
    reply = client.post("/api/v1/search", headers=auth(token), json=body)
    assert reply.status_code == 200, reply.text
    return [r["document_id"] for r in reply.json()["results"]]


def test_a_linked_document_reaches_only_its_readers_now(client: httpx.Client, tokens: dict[str, str]) -> None:
    mill = add(client, tokens["ada"], "mill", "Harrow Mill", MILL, ["research", "legal"])
    brask = add(client, tokens["ada"], "brask", "Ione Brask", BRASK, ["research"])
    for i, text in enumerate(OTHERS):
        add(client, tokens["ada"], f"other-{i}", f"Mill note {i}", text, ["research", "legal"])
    assert brask not in found(client, tokens["ada"], linked=0)[:3]  # the search alone does not bring it
    ada = found(client, tokens["ada"])
    assert mill in ada[:2] and brask in ada[:3], ada  # the director's page, named by the film's passage
    assert brask not in found(client, tokens["bob"])  # bob may not read it: never linked
    path = f"/api/v1/documents/{brask}"
    shared = client.patch(path, headers=auth(tokens["ada"]), json={"acl": {"departments": ["research", "legal"]}})
    assert shared.status_code == 200, shared.text
    assert brask in found(client, tokens["bob"])[:3]  # the next search follows the ACL
    assert client.delete(path, headers=auth(tokens["ada"])).status_code in (200, 202, 204)
    assert brask not in found(client, tokens["bob"]) and brask not in found(client, tokens["ada"])

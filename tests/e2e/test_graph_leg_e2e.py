"""The graph leg of search against the real mesh (gateway → graph RankChunks → retriever fusion): a page that
names its subject only in its title is reached through the name the best passage gives (the title is the
page's topic entity), only by a user who may read it, and the search alone does not bring it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ragmesh_dev.devstack import Stack

from .conftest import auth, uploaded_ready

pytestmark = pytest.mark.e2e

MILL = "Harrow Mill is a 1958 drama film directed by Orla Penhallow, set at a paper mill on a river.\n"
# the director's page never names her: only its title does
PAGE = "She was born in 1921 in a harbour town and later taught at a conservatory in the capital.\n"
QUESTION = "Which film is set at a paper mill on a river?"
OTHERS = [  # nearer the question than the director's page, and naming nothing: the search alone ranks them above it
    "An old paper mill stands on a river near the town.",
    "Towns with mills grew up along rivers in the nineteenth century.",
    "A river drives the wheel of a grain mill.",
    "Paper is made from wood pulp at a mill.",
]


@pytest.fixture(scope="module")
def tokens(mesh: Stack) -> dict[str, str]:
    return {
        "ada": mesh.token("ada-leg", "leg-research", ["employee"]),
        "bob": mesh.token("bob-leg", "leg-legal", ["employee"]),
    }


def add(client: httpx.Client, token: str, title: str, text: str, departments: list[str]) -> str:
    """A plain-text upload: the parser titles it by its file name ("Orla_Penhallow.txt" → "Orla_Penhallow")."""
    return uploaded_ready(client, token, f"{title.replace(' ', '_')}.txt", text.encode(), {"departments": departments})


def found(
    client: httpx.Client, token: str, graph_leg: bool, placement: str = "fuse"
) -> tuple[list[str], dict[str, Any]]:
    body: dict[str, Any] = {
        "graph_placement": placement,
        "query": QUESTION,
        "top_k": 5,
        "graph_leg": graph_leg,
        "graph_weight": 4.0,  # the default seeding (the top 2 passages); a weight that leaves no near tie
        "linked_documents": 0,  # the graph leg alone
        "relevance_gate": False,
    }
    reply = client.post("/api/v1/search", headers=auth(token), json=body)
    assert reply.status_code == 200, reply.text
    return [r["document_id"] for r in reply.json()["results"]], reply.json()


def test_the_graph_leg_reaches_a_page_through_its_title_only_for_its_readers(
    client: httpx.Client, tokens: dict[str, str]
) -> None:
    both = ["leg-research", "leg-legal"]
    mill = add(client, tokens["ada"], "Harrow Mill", MILL, both)
    page = add(client, tokens["ada"], "Orla Penhallow", PAGE, ["leg-research"])
    for i, text in enumerate(OTHERS):
        add(client, tokens["ada"], f"Mill note {i}", text, both)
    alone, _ = found(client, tokens["ada"], graph_leg=False)
    assert page not in alone, alone  # sixth of the six: it shares no word with the question
    walked, reply = found(client, tokens["ada"], graph_leg=True)
    assert not reply.get("degraded"), reply.get("degraded")
    assert mill in walked[:2] and page in walked[:3], walked
    hidden, _ = found(client, tokens["bob"], graph_leg=True)
    assert mill in hidden and page not in hidden  # bob may not read the page: no mass reaches it
    # placed after instead of fused: the search's own top 2 stay, the leg's document comes third
    placed, reply = found(client, tokens["ada"], graph_leg=True, placement="after")
    assert not reply.get("degraded"), reply.get("degraded")
    assert placed[:2] == alone[:2] and placed[2] == page, (placed, alone)
    hidden, _ = found(client, tokens["bob"], graph_leg=True, placement="after")
    assert page not in hidden

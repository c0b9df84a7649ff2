"""A question for a table's largest row, or for how many of its rows hold a value, reads the whole table (the
gateway's table step, the answerer's one table per document and header): found using the product, "Which product
had the highest revenue?" over the shared workbook answered that the documents disagree, each of two chunks of the
one sheet with its own largest row. What the step reads is the user's (FetchSection under row-level security): a
copy of the sheet the user may not read never enters the answer, nor is its row counted, until its owner shares
it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ragmesh_dev.devstack import Stack

from .conftest import auth, uploaded_ready

pytestmark = pytest.mark.e2e

ROWS = 40
# revenue by row: the largest (9,900) in row 23, far from the question's words as any other row is
REVENUE = {n: 1000 + 37 * n for n in range(1, ROWS + 1)} | {23: 9900}
SOUTH = {n for n in range(1, ROWS + 1) if n % 5 == 0}  # the rows in the South region: spread over every chunk


def sheet(extra: str = "") -> bytes:
    lines = ["Gadget,Region,Units,Revenue"]
    lines += [
        f"Gadget {n:02d},{'South' if n in SOUTH else 'North'},{n % 7 + 1},{REVENUE[n]}" for n in range(1, ROWS + 1)
    ]
    return ("\n".join(lines) + "\n" + extra).encode()


def chat(client: httpx.Client, token: str, question: str) -> dict[str, Any]:
    reply = client.post("/api/v1/chat", headers=auth(token), json={"question": question, "cache": False})
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def test_the_largest_row_of_a_whole_sheet_and_only_of_sheets_the_user_may_read(
    mesh: Stack, client: httpx.Client
) -> None:
    tess = mesh.token("tab-tess", "finance", ["employee"])
    hugo = mesh.token("tab-hugo", "hr", ["employee"])
    mine = uploaded_ready(client, tess, "gadget_sales.csv", sheet())
    # HR's copy has a larger row; finance may not read it
    theirs = uploaded_ready(
        client, hugo, "gadget_sales_hr.csv", sheet("Gadget 99,South,1,99999\n"), acl={"departments": ["hr"]}
    )

    final = chat(client, tess, "Which gadget had the highest revenue?")
    table = next(p for p in final["progress"] if p.get("stage") == "table" and p.get("status") == "done")
    assert table["complete"] is True and table["table_chunks"] > 1, table
    assert final["verified"] is True and final["short_answer"] == "Gadget 23", final
    assert "9900" in final["answer"]
    assert {s["document_id"] for s in final["sources"]} == {mine}  # the whole sheet, and only hers
    assert "99999" not in str(final) and "Gadget 99" not in str(final)
    lowest = chat(client, tess, "Which gadget had the lowest revenue?")
    assert lowest["verified"] is True and lowest["short_answer"] == "Gadget 01", lowest
    # how many rows hold a value: counted over the whole sheet, each row cited; HR's South row is not counted
    south = chat(client, tess, "How many gadgets are in the South region?")
    counted = next(p for p in south["progress"] if p.get("stage") == "table" and p.get("status") == "done")
    assert counted["complete"] is True and counted["table_chunks"] > 1, counted
    assert south["verified"] is True and south["short_answer"] == str(len(SOUTH)), south
    assert {s["document_id"] for s in south["sources"]} == {mine}
    assert "Gadget 99" not in str(south) and "99999" not in str(south)

    # shared with finance: the two sheets' largest rows differ, and the answer shows both, each with its source
    patched = client.patch(
        f"/api/v1/documents/{theirs}", headers=auth(hugo), json={"acl": {"departments": ["finance"]}}
    )
    assert patched.status_code == 200, patched.text
    shared = chat(client, tess, "Which gadget had the highest revenue?")
    assert shared["verified"] is False and "99999" in shared["answer"] and "9900" in shared["answer"], shared
    # and HR's South row is counted now: the two sheets' counts differ, each shown with its source
    both = chat(client, tess, "How many gadgets are in the South region?")
    assert both["verified"] is False, both
    assert f"{len(SOUTH)} rows have Region “South”" in both["answer"], both
    assert f"{len(SOUTH) + 1} rows have Region “South”" in both["answer"], both

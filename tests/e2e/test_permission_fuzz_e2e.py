"""Permission fuzz: seeded random users and documents with random ACLs, through the HTTP API only.

Each document holds a unique marker word. Every user searches for every marker, lists and gets every
document, and a few chat; what each user sees must be exactly what the ACL model says (no leak, nothing
missing), and the counts must equal what PostgreSQL returns to the application role with that user's RLS
identity (an assertion signed with the stack's RLS key, verified by rag_set_identity, as the retriever sets it).
"""

from __future__ import annotations

import json
import random
import string
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg
import pytest

from ragmesh_common.rls import SET_IDENTITY, assertion
from ragmesh_dev.devstack import Stack

pytestmark = pytest.mark.e2e

SEED = 20250521
DEPARTMENTS = ["pf-sales", "pf-eng", "pf-legal", "pf-hr"]
ROLES = ["pf-manager", "pf-auditor", "pf-contractor"]
N_USERS, N_DOCS, N_CHATS = 7, 9, 4


@dataclass(frozen=True)
class Person:
    name: str
    department: str
    roles: tuple[str, ...]


@dataclass
class Doc:
    owner: Person
    marker: str
    public: bool = False
    departments: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    document_id: str = ""

    def acl(self) -> dict[str, Any]:
        return {"public": self.public, "departments": self.departments, "roles": self.roles, "users": self.users}

    def readable_by(self, person: Person) -> bool:
        """The ACL model: owner, public, named user, department, or a shared role; an empty ACL means the
        owner's department."""
        departments = self.departments
        if not (self.public or self.departments or self.roles or self.users) and self.owner.department:
            departments = [self.owner.department]
        return (
            self.public
            or person.name == self.owner.name
            or person.name in self.users
            or (bool(person.department) and person.department in departments)
            or bool(set(person.roles) & set(self.roles))
        )


def build(rng: random.Random) -> tuple[list[Person], list[Doc]]:
    people = [
        Person(f"pf-user{i}", rng.choice([*DEPARTMENTS, ""]), tuple(rng.sample(ROLES, rng.randint(0, 2))))
        for i in range(N_USERS)
    ]
    docs = []
    for i in range(N_DOCS):
        marker = "quux" + "".join(rng.choices(string.ascii_lowercase, k=8)) + f"z{i}"
        doc = Doc(owner=rng.choice(people), marker=marker)
        kind = rng.random()
        if kind < 0.15:
            doc.public = True
        elif kind < 0.25:
            pass  # empty ACL: the owner's department
        else:
            doc.departments = rng.sample(DEPARTMENTS, rng.randint(0, 2))
            doc.roles = rng.sample(ROLES, rng.randint(0, 1))
            doc.users = [p.name for p in rng.sample(people, rng.randint(0, 2))]
        docs.append(doc)
    return people, docs


def markdown(doc: Doc, index: int) -> bytes:
    return (
        f"# Permission fuzz document {index}\n\n"
        f"This memo records the code word {doc.marker} for the quarterly planning review. "
        f"The code word {doc.marker} is confidential to the readers of this document.\n"
    ).encode()


def rls_documents(dsn: str, rls_key: str, person: Person) -> dict[str, str]:
    """Document id -> status, as the application role sees them with this user's verified RLS identity."""
    with psycopg.connect(dsn, connect_timeout=10) as conn, conn.transaction():
        conn.execute(
            SET_IDENTITY,
            assertion(rls_key, person.name, person.department, person.roles, conn.info.backend_pid),
        )
        return {row[0]: row[1] for row in conn.execute("SELECT id::text, status FROM documents").fetchall()}


def test_nobody_sees_a_document_the_acl_does_not_give_them(mesh: Stack) -> None:
    rng = random.Random(SEED)
    people, docs = build(rng)
    tokens = {p.name: mesh.token(p.name, p.department, list(p.roles)) for p in people}

    with httpx.Client(base_url=mesh.gateway_url, timeout=httpx.Timeout(300.0, connect=10.0)) as client:

        def call(method: str, path: str, person: Person, **kwargs: Any) -> httpx.Response:
            return client.request(method, path, headers={"Authorization": f"Bearer {tokens[person.name]}"}, **kwargs)

        for i, doc in enumerate(docs):
            reply = call(
                "POST",
                "/api/v1/documents",
                doc.owner,
                files={"file": (f"pf-{i}.md", markdown(doc, i))},
                data={"acl": json.dumps(doc.acl())},
            )
            assert reply.status_code == 202, reply.text
            doc.document_id = reply.json()["document_id"]
        deadline = time.monotonic() + 600
        for doc in docs:
            while True:
                status = call("GET", f"/api/v1/documents/{doc.document_id}", doc.owner).json()["status"]
                if status in ("ready", "failed"):
                    break
                assert time.monotonic() < deadline, f"{doc.document_id} still {status}"
                time.sleep(0.5)
            assert status == "ready", doc

        try:
            leaks, missing, checks = check_everyone(call, mesh.app_dsn, mesh.secret("rls_key"), people, docs, rng)
        finally:
            for doc in docs:
                if doc.document_id:
                    call("DELETE", f"/api/v1/documents/{doc.document_id}", doc.owner)

    visible = sum(d.readable_by(p) for p in people for d in docs)
    print(
        f"permission fuzz: {len(people)} users, {len(docs)} documents, {visible}/{len(people) * len(docs)} "
        f"user-document pairs readable, {checks} checks, {len(leaks)} leaks, {len(missing)} missing"
    )
    assert not leaks, leaks
    assert not missing, missing


def check_everyone(
    call: Any, dsn: str, rls_key: str, people: list[Person], docs: list[Doc], rng: random.Random
) -> tuple[list[str], list[str], int]:
    """Every user: list, get and search every document, and a seeded few chats. Returns the leaks (seen
    though not readable), the misses (readable but not seen) and the number of checks."""
    ours = {doc.document_id: doc for doc in docs}
    leaks: list[str] = []
    missing: list[str] = []
    checks = 0
    for person in people:
        expected = {d.document_id for d in docs if d.readable_by(person)}
        in_db = rls_documents(dsn, rls_key, person)
        # the ACL model and RLS agree on our documents
        assert {i for i in in_db if i in ours} == expected, (person, expected, in_db)

        listed = call("GET", "/api/v1/documents", person, params={"limit": 1000}).json()
        assert listed["total"] == len(in_db), (person, listed["total"], len(in_db))
        assert {d["document_id"] for d in listed["documents"]} == set(in_db), person
        for doc in docs:
            status = call("GET", f"/api/v1/documents/{doc.document_id}", person).status_code
            checks += 1
            if status == 200 and doc.document_id not in expected:
                leaks.append(f"GET {doc.marker} by {person}")
            elif status == 404 and doc.document_id in expected:
                missing.append(f"GET {doc.marker} by {person}")
            else:
                assert status in (200, 404), status

        ready = sum(1 for status in in_db.values() if status == "ready")
        for doc in docs:
            reply = call(
                "POST",
                "/api/v1/search",
                person,
                json={"query": doc.marker, "top_k": 100, "relevance_gate": False, "rerank": False},
            )
            assert reply.status_code == 200, reply.text
            body = reply.json()
            checks += 1
            assert body["accessible_documents"] == ready, (person, body["accessible_documents"], ready)
            for result in body["results"]:
                owner = ours.get(result["document_id"])
                if result["document_id"] not in in_db or (owner and result["document_id"] not in expected):
                    leaks.append(f"search {doc.marker} by {person} returned {result['document_id']}")
                for other in docs:
                    if other.marker in result["snippet"] and other.document_id not in expected:
                        leaks.append(f"search {doc.marker} by {person} showed marker {other.marker}")
            if doc.document_id in expected and not any(doc.marker in r["snippet"] for r in body["results"]):
                missing.append(f"search {doc.marker} by {person}")

    # chat is slow (the LLM): a seeded few, with a short answer; the sources must be readable
    for person, doc in ((rng.choice(people), rng.choice(docs)) for _ in range(N_CHATS)):
        expected = {d.document_id for d in docs if d.readable_by(person)}
        reply = call(
            "POST",
            "/api/v1/chat",
            person,
            json={"question": f"What is the code word {doc.marker}?", "max_tokens": 8, "graph": False},
        )
        assert reply.status_code == 200, reply.text
        body = reply.json()
        checks += 1
        ready = sum(1 for status in rls_documents(dsn, rls_key, person).values() if status == "ready")
        assert body["accessible_documents"] == ready
        assert body["outcome"] == ("no_permission" if ready == 0 else body["outcome"])
        for source in body["sources"]:
            if source["document_id"] in ours and source["document_id"] not in expected:
                leaks.append(f"chat {doc.marker} by {person} cited {source['document_id']}")
        for other in docs:
            if other.document_id not in expected and other.marker in body["answer"] + str(body["sources"]):
                leaks.append(f"chat {doc.marker} by {person} showed marker {other.marker}")

    return leaks, missing, checks

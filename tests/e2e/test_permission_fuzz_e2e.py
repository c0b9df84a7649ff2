"""Permission fuzz: seeded random users and documents with random ACLs, then seeded changes, through the HTTP API only.

Each document holds a unique marker word and a unique pair of related names (a graph fact). Every user searches
for every marker, lists and gets every document, and a few chat; what each user sees must be exactly what the
ACL model says (no leak, nothing missing), and the counts must equal what PostgreSQL returns to the application
role with that user's RLS identity (an assertion signed with the stack's RLS key, verified by rag_set_identity,
as the retriever sets it).

Then a seeded run of changes (ACL changes by PATCH, new versions by PUT content, deletes). Right after each,
every user gets and searches the changed document, and the users whose access changed (and two others) ask a
chat about its names and read how many graph facts the chat used (the `graph` progress event): a user who may no
longer read it gets no fact about it. After a new version, every user checks that the old names are gone.
Users who lose access ask once just before the change too (they see its facts then), so an access answer kept
from before the change would show (the graph once cached them for 5 s and leaked them after a PATCH).
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
CHANGES = ["patch"] * 11 + ["put"] * 4 + ["delete"] * 3  # shuffled by the seed


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
    name: str = ""  # "<Name> Holdings Inc. hired <Name> Labs Ltd.": one graph relation only this document holds
    patched: bool = False  # an empty ACL set by PATCH is private to the owner (at upload: the owner's department)
    version: int = 1
    retired: list[tuple[str, str]] = field(default_factory=list)  # (marker, name) of replaced versions

    def acl(self) -> dict[str, Any]:
        return {"public": self.public, "departments": self.departments, "roles": self.roles, "users": self.users}

    def readable_by(self, person: Person) -> bool:
        """The ACL model: owner, public, named user, department, or a shared role; an empty ACL means the
        owner's department."""
        departments = self.departments
        empty = not (self.public or self.departments or self.roles or self.users)
        if empty and self.owner.department and not self.patched:
            departments = [self.owner.department]
        return (
            self.public
            or person.name == self.owner.name
            or person.name in self.users
            or (bool(person.department) and person.department in departments)
            or bool(set(person.roles) & set(self.roles))
        )


def new_marker(rng: random.Random, i: int) -> tuple[str, str]:
    """A marker word (found by search) and a name (two graph entities, one relation) no other document has."""
    marker = "quux" + "".join(rng.choices(string.ascii_lowercase, k=8)) + f"z{i}"
    return marker, "Vorn" + "".join(rng.choices(string.ascii_lowercase, k=8))


def random_acl(rng: random.Random, doc: Doc, people: list[Person]) -> None:
    kind = rng.random()
    doc.public, doc.departments, doc.roles, doc.users = False, [], [], []
    if kind < 0.15:
        doc.public = True
    elif kind < 0.25:
        pass  # empty ACL: the owner's department at upload, the owner only after a PATCH
    else:
        doc.departments = rng.sample(DEPARTMENTS, rng.randint(0, 2))
        doc.roles = rng.sample(ROLES, rng.randint(0, 1))
        doc.users = [p.name for p in rng.sample(people, rng.randint(0, 2))]


def build(rng: random.Random) -> tuple[list[Person], list[Doc]]:
    people = [
        Person(f"pf-user{i}", rng.choice([*DEPARTMENTS, ""]), tuple(rng.sample(ROLES, rng.randint(0, 2))))
        for i in range(N_USERS)
    ]
    docs = []
    for i in range(N_DOCS):
        marker, name = new_marker(rng, i)
        doc = Doc(owner=rng.choice(people), marker=marker, name=name)
        random_acl(rng, doc, people)
        docs.append(doc)
    return people, docs


def markdown(doc: Doc, index: int) -> bytes:
    return (
        f"# Permission fuzz document {index}\n\n"
        f"This memo records the code word {doc.marker} for the quarterly planning review. "
        # with the legal forms spaCy's small English model tags both names as organisations for any random <Name>
        # (without them it missed about 1 in 15); the test is about access, not about the NER model
        f"{doc.name} Holdings Inc. hired {doc.name} Labs Ltd. for the review. "
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
    # never changed, readable by all: every user's chat has a source, so it always reaches the graph step
    anchor = Doc(owner=people[0], marker="quuxanchorz", name="Vornanchor", public=True)
    docs.append(anchor)
    tokens = {p.name: mesh.token(p.name, p.department, list(p.roles)) for p in people}

    with httpx.Client(base_url=mesh.gateway_url, timeout=httpx.Timeout(300.0, connect=10.0)) as client:

        def call(method: str, path: str, person: Person, **kwargs: Any) -> httpx.Response:
            return client.request(method, path, headers={"Authorization": f"Bearer {tokens[person.name]}"}, **kwargs)

        def stream(method: str, path: str, person: Person, **kwargs: Any) -> Any:
            return client.stream(method, path, headers={"Authorization": f"Bearer {tokens[person.name]}"}, **kwargs)

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
        for doc in docs:
            wait_ready(call, doc)

        try:
            leaks, missing, checks = check_everyone(call, mesh.app_dsn, mesh.secret("rls_key"), people, docs, rng)
            changes = Changes(call, stream, people, docs, rng)
            for kind in rng.sample(CHANGES, len(CHANGES)):
                changes.apply(kind, rng.choice([d for d in docs if d is not anchor]))
            leaks += changes.leaks
            missing += changes.missing
            checks += changes.checks
            # after the changes, the whole check again (deleted documents are gone from `docs`)
            more_leaks, more_missing, more_checks = check_everyone(
                call, mesh.app_dsn, mesh.secret("rls_key"), people, docs, rng
            )
            leaks, missing, checks = leaks + more_leaks, missing + more_missing, checks + more_checks
        finally:
            for doc in docs:
                if doc.document_id:
                    call("DELETE", f"/api/v1/documents/{doc.document_id}", doc.owner)

    visible = sum(d.readable_by(p) for p in people for d in docs)
    print(
        f"permission fuzz: {len(people)} users, {len(docs)} documents left, {visible}/{len(people) * len(docs)} "
        f"user-document pairs readable, {len(CHANGES)} changes ({changes.revoked} revocations), "
        f"{checks} checks ({changes.graph_reads} graph reads), {len(leaks)} leaks, {len(missing)} missing"
    )
    assert changes.revoked >= 5 and changes.graph_reads > 0, "the seeded changes must revoke access to test it"
    assert not leaks, leaks
    assert not missing, missing


def wait_ready(call: Any, doc: Doc, version: int = 1) -> None:
    """Until the document (at `version`) is ready and no other version is being ingested."""
    deadline = time.monotonic() + 600
    while True:
        body = call("GET", f"/api/v1/documents/{doc.document_id}", doc.owner).json()
        if body["status"] == "failed" or (
            body["status"] == "ready" and body["version"] >= version and not body["pending_version"]
        ):
            break
        assert time.monotonic() < deadline, f"{doc.document_id} still {body['status']}"
        time.sleep(0.5)
    assert body["status"] == "ready" and body["version"] == version, body


class Changes:
    """Applies one change at a time and checks every user's view of the changed document right after it."""

    def __init__(self, call: Any, stream: Any, people: list[Person], docs: list[Doc], rng: random.Random) -> None:
        self.call, self.stream, self.people, self.docs, self.rng = call, stream, people, docs, rng
        self.leaks: list[str] = []
        self.missing: list[str] = []
        self.checks = self.graph_reads = self.revoked = 0

    def graph_facts(self, person: Person, name: str) -> int | None:
        """How many graph facts a chat about `name` used (the `graph` progress event), read from the stream, which
        is closed then (the answer is not needed); None when the chat ended without a graph step."""
        self.checks += 1
        body = {"question": f"Who did {name} Holdings Inc. hire?", "stream": True, "max_tokens": 1, "top_k": 1}
        body |= {"rerank": False, "relevance_gate": False, "routing": False, "graph": True}
        with self.stream("POST", "/api/v1/chat", person, json=body) as reply:
            assert reply.status_code == 200, reply.read()
            event = "message"
            for line in reply.iter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:"):
                    data = json.loads(line.split(":", 1)[1])
                    assert event != "error", data
                    if event == "progress" and data.get("stage") == "graph" and data.get("status") == "done":
                        assert not data["degraded"], data
                        self.graph_reads += 1
                        return int(data["facts"])
                    if event == "final":
                        return None
        return None

    def expect_graph(self, person: Person, name: str, *, readable: bool | None, note: str) -> None:
        """`readable` False: no fact about `name`; True: some; None: either (a version being replaced)."""
        facts = self.graph_facts(person, name)
        if facts and readable is False:
            self.leaks.append(f"graph: {facts} facts about {name} for {person.name} ({note})")
        elif not facts and readable:
            self.missing.append(f"graph: no fact about {name} for {person.name} ({note}, got {facts})")

    def expect_get_and_search(
        self, person: Person, doc: Doc, marker: str, *, reader: bool, visible: bool | None, note: str
    ) -> None:
        """GET answers 200 exactly when the user is a `reader` (by the ACL; none after a delete); a search for
        `marker` returns the document only to a reader and shows the marker exactly when `visible` (None:
        either, while a new version replaces the one that holds it)."""
        if marker == doc.marker:
            status = self.call("GET", f"/api/v1/documents/{doc.document_id}", person).status_code
            self.checks += 1
            assert status in (200, 404), status
            if status == 200 and not reader:
                self.leaks.append(f"GET {doc.document_id} by {person.name} ({note})")
            elif status == 404 and reader:
                self.missing.append(f"GET {doc.document_id} by {person.name} ({note})")
        reply = self.call(
            "POST",
            "/api/v1/search",
            person,
            json={"query": marker, "top_k": 100, "relevance_gate": False, "rerank": False},
        )
        assert reply.status_code == 200, reply.text
        self.checks += 1
        results = reply.json()["results"]
        if not reader and any(r["document_id"] == doc.document_id for r in results):
            self.leaks.append(f"search {marker} by {person.name} returned {doc.document_id} ({note})")
        shown = any(marker in r["snippet"] for r in results)
        if shown and visible is False:
            self.leaks.append(f"search {marker} by {person.name} showed it ({note})")
        elif visible and not shown:
            self.missing.append(f"search {marker} by {person.name} ({note})")

    def apply(self, kind: str, doc: Doc) -> None:
        before = {p.name for p in self.people if doc.readable_by(p)}
        note = f"{kind} {doc.marker}"
        if kind == "patch":
            random_acl(self.rng, doc, self.people)
            doc.patched = True
        after = {p.name for p in self.people if doc.readable_by(p)} if kind != "delete" else set()
        losers = [p for p in self.people if p.name in before - after]
        self.revoked += len(losers)
        # the users about to lose access read the document's graph facts now (and must see them)
        for person in losers:
            self.expect_graph(person, doc.name, readable=True, note=f"before {note}")
        if kind == "patch":
            reply = self.call("PATCH", f"/api/v1/documents/{doc.document_id}", doc.owner, json={"acl": doc.acl()})
            assert reply.status_code == 200, reply.text
        elif kind == "put":
            doc.retired.append((doc.marker, doc.name))
            doc.marker, doc.name = new_marker(self.rng, len(doc.retired) * 100 + self.docs.index(doc))
            reply = self.call(
                "PUT",
                f"/api/v1/documents/{doc.document_id}/content",
                doc.owner,
                files={"file": ("pf-new.md", markdown(doc, self.docs.index(doc)))},
            )
            assert reply.status_code == 202, reply.text
            doc.version = reply.json()["ingesting_version"]
        else:
            reply = self.call("DELETE", f"/api/v1/documents/{doc.document_id}", doc.owner)
            assert reply.status_code == 200, reply.text
            self.docs.remove(doc)
        # right after the change: the losers first (what they read a moment ago must be gone), then everyone. The
        # graph (a chat each, the costly check) for those whose access changed and a seeded two of the others.
        changed = set(before ^ after)
        others = [p for p in self.people if p.name not in changed]
        graph_for = {p.name for p in self.rng.sample(others, min(2, len(others)))} | changed
        for person in [*losers, *(p for p in self.people if p not in losers)]:
            readable = person.name in after
            if kind == "put":  # the old version stays visible until the new one replaces it: no misses asserted
                old_marker, old_name = doc.retired[-1]
                if person.name in graph_for:
                    self.expect_graph(person, old_name, readable=None if readable else False, note=note)
                self.expect_get_and_search(
                    person, doc, old_marker, reader=readable, visible=None if readable else False, note=note
                )
            else:
                if person.name in graph_for:
                    self.expect_graph(person, doc.name, readable=readable, note=note)
                self.expect_get_and_search(person, doc, doc.marker, reader=readable, visible=readable, note=note)
        if kind == "put":
            wait_ready(self.call, doc, doc.version)
            for person in self.people:
                readable = person.name in after
                for old_marker, old_name in doc.retired[-1:]:  # replaced: gone for everyone
                    self.expect_graph(person, old_name, readable=False, note=f"{note} old version")
                    self.expect_get_and_search(
                        person, doc, old_marker, reader=readable, visible=False, note=f"{note} old version"
                    )
                self.expect_graph(person, doc.name, readable=readable, note=f"{note} new version")
                self.expect_get_and_search(
                    person, doc, doc.marker, reader=readable, visible=readable, note=f"{note} new version"
                )


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

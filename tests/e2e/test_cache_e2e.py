"""Semantic cache fuzz through the HTTP API: seeded users asking paraphrased questions while document ACLs change
and documents are deleted. Whatever the cache serves, no user ever gets a source, a marker or an answer from a
document the ACL model says they cannot read now; a repeated question is a hit that names the first trace (in
the response and in the stored trace); an ACL change that keeps the reader's access still ends the hit (the
document changed); and the admin API shows the hit rate.
"""

from __future__ import annotations

import json
import random
import string
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from ragmesh_dev.devstack import Stack

pytestmark = pytest.mark.e2e

SEED = 20261125
DEPARTMENTS = ["ca-eng", "ca-sales", "ca-hr"]
PROJECTS = ["Alder", "Birch", "Cedar"]
N_STEPS = 14
CHAT_TIMEOUT = 300.0  # client-side bound: the gateway's answer deadline (180 s) plus slack


@dataclass(frozen=True)
class Person:
    name: str
    department: str
    roles: tuple[str, ...] = ()


@dataclass
class Doc:
    owner: Person
    project: str
    marker: str
    departments: list[str]
    users: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    document_id: str = ""
    deleted: bool = False

    def acl(self) -> dict[str, Any]:
        return {"public": False, "departments": self.departments, "roles": self.roles, "users": self.users}

    def readable_by(self, person: Person) -> bool:
        if self.deleted:
            return False
        departments = self.departments
        if not (self.departments or self.roles or self.users):
            departments = [self.owner.department]
        return (
            person.name == self.owner.name
            or person.name in self.users
            or person.department in departments
            or bool(set(person.roles) & set(self.roles))
        )

    def markdown(self) -> bytes:
        # a dated fact the answerer extracts and verifies (only verified answers are cached), and the marker
        # beside it (any trace of it in a reply to someone who may not read the document is a leak)
        return (
            f"# Project {self.project}\n\n"
            f"Project {self.project} was founded in {FOUNDED[self.project]}. "
            f"The vault code of project {self.project} is {self.marker}.\n"
        ).encode()


FOUNDED = {"Alder": 1987, "Birch": 1993, "Cedar": 2004}


def variants(project: str) -> list[str]:
    """The question and paraphrases of it (rule-made: case, punctuation, capitals, word order)."""
    return [
        f"When was project {project} founded?",
        f"when was project {project} founded",
        f"When was Project {project} founded?",
        f"In which year was project {project} founded?",
    ]


@dataclass
class Run:
    client: httpx.Client
    tokens: dict[str, str]
    docs: list[Doc]
    leaks: list[str] = field(default_factory=list)
    chats: int = 0
    hits: int = 0

    def call(self, method: str, path: str, person: Person | str, **kwargs: Any) -> httpx.Response:
        name = person if isinstance(person, str) else person.name
        return self.client.request(method, path, headers={"Authorization": f"Bearer {self.tokens[name]}"}, **kwargs)

    def ask(self, person: Person, question: str, **options: Any) -> dict[str, Any]:
        reply = self.call(
            "POST", "/api/v1/chat", person, json={"question": question, "max_tokens": 24, "graph": False, **options}
        )
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        self.chats += 1
        self.hits += bool(body["cache_hit"])
        self.check(person, question, body)
        return body

    def check(self, person: Person, question: str, body: dict[str, Any]) -> None:
        """No source, marker or quote of a document the person cannot read now (cache hit or not)."""
        ours = {d.document_id: d for d in self.docs}
        where = f"{person.name} asked {question!r} (cache_hit={body['cache_hit']})"
        for source in body["sources"]:
            doc = ours.get(source["document_id"])
            if doc is not None and not doc.readable_by(person):
                self.leaks.append(f"{where}: source {doc.project}")
        text = json.dumps({k: body.get(k) for k in ("answer", "short_answer", "sources", "evidence", "sentences")})
        for doc in self.docs:
            if not doc.readable_by(person) and doc.marker in text:
                self.leaks.append(f"{where}: marker of {doc.project}")
        if body["cache_hit"]:
            assert body["cached_trace_id"] and body["cached_trace_id"] != body["trace_id"], body

    def patch_acl(self, doc: Doc) -> None:
        reply = self.call("PATCH", f"/api/v1/documents/{doc.document_id}", doc.owner, json={"acl": doc.acl()})
        assert reply.status_code == 200, reply.text


def wait_ready(run: Run) -> None:
    deadline = time.monotonic() + 600
    for doc in run.docs:
        while True:
            status = run.call("GET", f"/api/v1/documents/{doc.document_id}", doc.owner).json()["status"]
            if status in ("ready", "failed"):
                break
            assert time.monotonic() < deadline, f"{doc.project} still {status}"
            time.sleep(0.5)
        assert status == "ready", doc


def cache_spans(run: Run, admin: str, trace_id: str) -> list[dict[str, Any]]:
    """The spans of a trace that carry the cache's hit attribute (stored asynchronously: polled)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        reply = run.call("GET", f"/api/v1/traces/{trace_id}", admin)
        if reply.status_code == 200:
            spans = [s for s in reply.json()["spans"] if (s.get("attributes") or {}).get("rag.cache.hit") is True]
            if spans:
                return spans
        time.sleep(1)
    return []


def test_the_cache_never_serves_a_source_the_asker_cannot_read(mesh: Stack) -> None:
    rng = random.Random(SEED)
    ann, ben = Person("ca-ann", "ca-eng"), Person("ca-ben", "ca-eng")
    cat, dan = Person("ca-cat", "ca-sales"), Person("ca-dan", "ca-hr", ("ca-auditor",))
    people = [ann, ben, cat, dan]
    tokens = {p.name: mesh.token(p.name, p.department, list(p.roles)) for p in people}
    tokens["ca-admin"] = mesh.token("ca-admin", "", ["admin"])

    def marker(i: int) -> str:
        return "quux" + "".join(rng.choices(string.ascii_lowercase, k=8)) + f"v{i}"

    docs = [
        Doc(ann, PROJECTS[0], marker(0), ["ca-eng", "ca-sales"]),
        Doc(cat, PROJECTS[1], marker(1), ["ca-sales"], users=[dan.name]),
        Doc(ann, PROJECTS[2], marker(2), ["ca-eng"]),
    ]
    with httpx.Client(base_url=mesh.gateway_url, timeout=httpx.Timeout(CHAT_TIMEOUT, connect=10.0)) as client:
        run = Run(client, tokens, docs)
        for i, doc in enumerate(docs):
            reply = run.call(
                "POST",
                "/api/v1/documents",
                doc.owner,
                files={"file": (f"ca-{i}.md", doc.markdown())},
                data={"acl": json.dumps(doc.acl())},
            )
            assert reply.status_code == 202, reply.text
            doc.document_id = reply.json()["document_id"]
        wait_ready(run)
        try:
            directed(run, docs, ann, ben)
            fuzz(run, rng, people, docs)
            stats = run.call("GET", "/api/v1/admin/cache", "ca-admin").json()
            assert run.call("GET", "/api/v1/admin/cache", ann).status_code == 403
            assert run.call("DELETE", "/api/v1/admin/cache", ann).status_code == 403
            cleared = run.call("DELETE", "/api/v1/admin/cache", "ca-admin")
            assert cleared.status_code == 200 and cleared.json()["cleared"] == stats["entries"], cleared.text
            assert run.call("GET", "/api/v1/admin/cache", "ca-admin").json()["entries"] == 0
        finally:
            for doc in docs:
                if not doc.deleted:
                    run.call("DELETE", f"/api/v1/documents/{doc.document_id}", doc.owner)
    print(f"cache fuzz: {run.chats} chats, {run.hits} cache hits, {len(run.leaks)} leaks; admin stats {stats}")
    assert not run.leaks, run.leaks
    assert stats["enabled"] and stats["hits"] >= 1 and stats["hit_rate"] is not None, stats


def directed(run: Run, docs: list[Doc], ann: Person, ben: Person) -> None:
    """The same question twice is a hit naming the first trace; an ACL change that keeps the reader's access
    still ends it; `cache: false` never hits."""
    question = variants(docs[0].project)[0]
    first = run.ask(ann, question)
    assert first["outcome"] == "answer" and first["verified"], first  # the case the cache stores
    assert not first["cache_hit"]
    second = run.ask(ann, question)
    assert second["cache_hit"] and second["cached_trace_id"] == first["trace_id"], second
    assert second["answer"] == first["answer"]
    spans = cache_spans(run, "ca-admin", second["trace_id"])
    assert spans and spans[0]["attributes"].get("rag.cache.trace_id") == first["trace_id"], spans
    assert not run.ask(ann, question, cache=False)["cache_hit"]
    paraphrase = run.ask(ben, variants(docs[0].project)[1])  # another reader, another wording
    print(f"cache fuzz: paraphrase by another reader: cache_hit={paraphrase['cache_hit']}")
    docs[0].roles = ["ca-auditor"]  # dan may read it now; ann's and ben's access is unchanged
    run.patch_acl(docs[0])
    assert not run.ask(ann, question)["cache_hit"]  # the document changed: its answers are gone


def fuzz(run: Run, rng: random.Random, people: list[Person], docs: list[Doc]) -> None:
    for step in range(N_STEPS):
        live = [d for d in docs if not d.deleted]
        roll = rng.random()
        if roll < 0.7 or not live:
            doc = rng.choice(docs)
            wording = variants(doc.project)
            # the exact question half the time: cached answers are met often, by readers and non-readers
            run.ask(rng.choice(people), wording[0] if rng.random() < 0.5 else rng.choice(wording))
        elif roll < 0.9:
            doc = rng.choice(live)
            doc.departments = rng.sample(["ca-eng", "ca-sales", "ca-hr"], rng.randint(0, 2))
            doc.users = [p.name for p in rng.sample(people, rng.randint(0, 1))]
            doc.roles = rng.sample(["ca-auditor"], rng.randint(0, 1))
            run.patch_acl(doc)
        else:
            doc = rng.choice(live)
            assert run.call("DELETE", f"/api/v1/documents/{doc.document_id}", doc.owner).status_code == 200
            doc.deleted = True
        if step == N_STEPS // 2 and not docs[1].deleted:
            # a reader loses access between the question being cached and asked again
            readers = [p for p in people if docs[1].readable_by(p)]
            asker = readers[0]
            run.ask(asker, variants(docs[1].project)[0])
            docs[1].users, docs[1].departments, docs[1].roles = [], [docs[1].owner.department], []
            run.patch_acl(docs[1])
            for person in people:
                run.ask(person, variants(docs[1].project)[0])

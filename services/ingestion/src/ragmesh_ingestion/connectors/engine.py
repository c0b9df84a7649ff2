"""One connector run: a source's outcomes turned into documents, item states and a report.

Per item, in the order the source meets them: new bytes create a document (the catalogue, the upload store and the
ingestion queue, as an upload: sink.py), changed bytes become its next version, an ACL that changed is set on the
document, and an item that is gone deletes its document. The item's state is written as soon as its document
calls are done, so a run killed midway (the worker stopped, the machine rebooted) resumes at the next run without
doing again what is done; the next run marks the dead one `interrupted`.

Identical files share one document (the catalogue keeps one document per owner and content hash): its ACL is the
union of the ACLs of the items that hold it (who may read any copy may read the content), and it is deleted only
with the last of them.

Deletions: a source whose pass was complete (every folder listed) deletes the documents of the items it did not
meet; a source that says an item is gone (HTTP 404/410) deletes that one. A source that cannot be read at all
fails the run and deletes nothing.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragmesh_common.connectors import MAX_PROBLEMS, ConnectorStore, ItemState
from ragmesh_ingestion.connectors.base import (
    Failed,
    Fetched,
    Gone,
    NotModified,
    Outcome,
    Scan,
    Skipped,
    Source,
    SourceUnavailable,
)

logger = logging.getLogger(__name__)
PROGRESS_EVERY = 25  # items between two writes of the running counts
COUNTS = ("new", "changed", "unchanged", "deleted", "acl_changed", "skipped", "failed")


class SinkError(Exception):
    """A document call failed for one item (the reason goes into the report; the item is tried again next run)."""


class DocumentGone(SinkError):
    """The item's document no longer exists (someone deleted it): the item is ingested as new."""


class Sink(Protocol):
    """Where documents are made: the catalogue and the ingestion queue (sink.MeshSink), as the connector's identity."""

    def create(self, item: Fetched, sha256: str, acl: dict[str, Any]) -> tuple[str, bool]:
        """The document id, and whether it existed already (the connector's document with these bytes)."""

    def new_version(self, document_id: str, item: Fetched, sha256: str) -> None: ...

    def set_acl(self, document_id: str, acl: dict[str, Any]) -> None: ...

    def delete(self, document_id: str) -> None: ...


def union_acl(acls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "public": any(a.get("public", False) for a in acls),
        **{k: sorted({v for a in acls for v in a.get(k, [])}) for k in ("departments", "roles", "users")},
    }


@dataclass
class Report:
    status: str = "succeeded"
    counts: Counter[str] = field(default_factory=Counter)
    problems: list[dict[str, str]] = field(default_factory=list)
    message: str = ""

    def problem(self, key: str, reason: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append({"key": key[:1000], "reason": reason[:500]})

    def counts_json(self) -> dict[str, int]:
        return {name: self.counts[name] for name in COUNTS}


class SyncEngine:
    def __init__(self, store: ConnectorStore, sink: Sink, connector_id: str, run_id: str) -> None:
        self.store = store
        self.sink = sink
        self.connector_id = connector_id
        self.run_id = run_id
        self.report = Report()
        self.states: dict[str, ItemState] = {}
        self.holders: dict[str, set[str]] = {}  # document id -> the keys of the items that hold it

    # ---------- bookkeeping ----------
    def _hold(self, state: ItemState) -> None:
        old = self.states.get(state.source_key)
        if old is not None and old.document_id and old.document_id != state.document_id:
            self.holders.get(old.document_id, set()).discard(state.source_key)
        self.states[state.source_key] = state
        if state.document_id:
            self.holders.setdefault(state.document_id, set()).add(state.source_key)

    def _save(self, state: ItemState) -> None:
        self.store.save_item(self.connector_id, state, self.run_id)  # committed: this item is done
        self._hold(state)

    def _document_acl(self, document_id: str, key: str, acl: dict[str, Any]) -> dict[str, Any]:
        acls = [acl] + [self.states[k].acl for k in self.holders.get(document_id, set()) if k != key]
        return union_acl(acls) if len(acls) > 1 else acl

    # ---------- one item ----------
    def _fetched(self, item: Fetched, state: ItemState | None) -> None:
        sha = hashlib.sha256(item.content).hexdigest()
        shared = state is not None and len(self.holders.get(state.document_id, set())) > 1
        if state is not None and state.document_id and state.content_sha256 == sha:
            self._acl(state, item.acl)
            self._save(ItemState(item.key, sha, item.etag, item.last_modified, item.acl, state.document_id))
            self.report.counts["unchanged"] += 1
            return
        if state is not None and state.document_id and not shared:
            try:
                self.sink.new_version(state.document_id, item, sha)
            except DocumentGone:
                state = None
            else:
                self._acl(state, item.acl)
                self._save(ItemState(item.key, sha, item.etag, item.last_modified, item.acl, state.document_id))
                self.report.counts["changed"] += 1
                return
        document_id, existing = self.sink.create(item, sha, item.acl)
        if existing:  # the same bytes as another item, or as this one in a run that stopped before its state
            self.sink.set_acl(document_id, self._document_acl(document_id, item.key, item.acl))
        previous = state.document_id if state is not None else ""
        self._save(ItemState(item.key, sha, item.etag, item.last_modified, item.acl, document_id))
        if previous and previous != document_id:  # it held a shared document: that one stays with the others
            self.sink.set_acl(previous, self._document_acl(previous, "", {"public": False}))
        self.report.counts["changed" if previous else "new"] += 1

    def _acl(self, state: ItemState, acl: dict[str, Any]) -> None:
        if state.acl != acl:
            self.sink.set_acl(state.document_id, self._document_acl(state.document_id, state.source_key, acl))
            self.report.counts["acl_changed"] += 1

    def _delete(self, key: str, state: ItemState) -> None:
        others = self.holders.get(state.document_id, set()) - {key}
        if state.document_id and not others:
            self.sink.delete(state.document_id)
        elif state.document_id:  # another item holds the same document: it stays, with their ACL
            self.holders[state.document_id].discard(key)
            self.sink.set_acl(state.document_id, self._document_acl(state.document_id, key, {"public": False}))
        self.store.delete_item(self.connector_id, key)
        self.states.pop(key, None)
        self.report.counts["deleted"] += 1

    def _apply(self, outcome: Outcome, state: ItemState | None) -> None:
        try:
            if isinstance(outcome, Fetched):
                self._fetched(outcome, state)
            elif isinstance(outcome, NotModified):
                if state is None:
                    raise SinkError("the source reported no change for an item it never gave")
                self._acl(state, outcome.acl)
                if state.acl != outcome.acl:
                    self._save(ItemState(**{**vars(state), "acl": outcome.acl}))
                self.report.counts["unchanged"] += 1
            elif isinstance(outcome, Gone):
                if state is not None:
                    self._delete(outcome.key, state)
            elif isinstance(outcome, Skipped):
                self.report.counts["skipped"] += 1
                self.report.problem(outcome.key, f"skipped: {outcome.reason}")
            elif isinstance(outcome, Failed):
                self.report.counts["failed"] += 1
                self.report.problem(outcome.key, outcome.reason)
        except SinkError as exc:
            logger.warning("connector %s: %s failed: %s", self.connector_id, outcome.key, exc)
            self.report.counts["failed"] += 1
            self.report.problem(outcome.key, str(exc))

    # ---------- the run ----------
    def run(self, source: Source | None) -> Report:
        """Syncs `source` (None: the connector is being deleted, so every item is gone)."""
        known: Mapping[str, ItemState] = self.store.items(self.connector_id)
        for state in known.values():
            self._hold(state)
        scan = Scan()
        seen: set[str] = set()
        try:
            if source is not None:
                for done, outcome in enumerate(source.scan(known, scan), 1):
                    seen.add(outcome.key)
                    self._apply(outcome, self.states.get(outcome.key))
                    if done % PROGRESS_EVERY == 0:
                        self.store.progress(self.run_id, self.report.counts_json())
        except SourceUnavailable as exc:
            self.report.status, self.report.message = "failed", str(exc)
            return self.report
        if scan.complete:
            for key, state in list(self.states.items()):
                if key not in seen:
                    try:
                        self._delete(key, state)
                    except SinkError as exc:
                        self.report.counts["failed"] += 1
                        self.report.problem(key, f"not deleted: {exc}")
        for problem in scan.problems:
            self.report.problem("", problem)
        if self.report.counts["failed"]:
            self.report.status = "partial"
        self.report.message = "; ".join(scan.problems)[:2000]
        return self.report

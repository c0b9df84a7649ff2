"""`ragmesh ingest`: files and folders to documents — parallel uploads, then (with --wait) each document
followed to ready or failed through its events stream, with polling where the stream is not available.

Resumable: before uploading, the files' SHA-256 are looked up (POST /api/v1/documents/lookup, `mine`), and a file
whose bytes are already one of the caller's documents (not failed) is not sent again (`present`). So a run stopped
with Ctrl-C, or broken off, is finished by running the same command again. The gateway's own duplicate check
(same owner, same bytes) stays the backstop for a file whose upload was cut off (a second Ctrl-C, a lost
connection).

Stopping (`request_stop`, the first Ctrl-C): no new upload starts, the uploads in flight finish and are reported,
following with --wait ends (those documents are reported as queued). So the summary lists every document the run
created.

Backpressure: an upload answered 429 or 503 with Retry-After is retried after that many seconds (every upload
of the run pauses until then), not failed."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from ragmesh_cli.client import ApiError, Settings, error_message, sse_events, unreachable

logger = logging.getLogger(__name__)

ACL_KEYS = ("public", "departments", "roles", "users")
TERMINAL = {"ready", "failed", "deleted"}
MAX_FOLLOWERS = 16  # event streams open at once while waiting (each holds a connection and a subscription)
POLL_INTERVAL_S = 1.0
LOOKUP_BATCH = 500  # content hashes per lookup request (the gateway takes up to 1,000)
MAX_RETRY_AFTER_S = 300.0  # a longer Retry-After is waited for this long, then the upload is tried again
BUSY_STATUSES = (429, 503)
TRANSPORT_RETRIES = 3  # an upload whose connection failed (refused, reset, timed out) is sent again, 1, 2, 4 s later


class Stopped(Exception):
    """A stop was requested while waiting to send (see `Ingest.request_stop`)."""


@dataclass
class Outcome:
    """What became of one file: ready, failed, duplicate (uploaded, same bytes as a document of yours), present
    (already one of your documents: not uploaded), queued (not waited for), skipped or error."""

    path: Path
    status: str
    document_id: str = ""
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status not in ("failed", "error")


def outcome_json(outcome: Outcome) -> dict[str, str]:
    return {
        "path": str(outcome.path),
        "status": outcome.status,
        "document_id": outcome.document_id,
        "reason": outcome.reason,
    }


async def accepted_extensions(settings: Settings) -> frozenset[str] | None:
    """The extensions the gateway accepts (GET /api/v1/formats, asked once per run); None when it cannot say
    (an older gateway, or none reachable): then every file is uploaded and a 415 names the unsupported ones."""
    transport = settings.transport if isinstance(settings.transport, httpx.AsyncBaseTransport) else None
    try:
        async with httpx.AsyncClient(
            base_url=settings.url, headers=settings.headers(), timeout=settings.timeout(), transport=transport
        ) as http:
            response = await http.get("/api/v1/formats")
        body = response.json() if response.is_success else None
    except (httpx.HTTPError, ValueError) as exc:
        logger.info("the gateway's formats are unknown (%s); uploading every file", exc)
        return None
    extensions = body.get("extensions") if isinstance(body, dict) else None
    return frozenset(str(e).lower() for e in extensions) if isinstance(extensions, list) and extensions else None


def collect(paths: Iterable[Path], extensions: frozenset[str] | None = None) -> tuple[list[Path], list[Outcome]]:
    """The files to upload (folders walked recursively, hidden entries left out) and those skipped, with why:
    an extension not in `extensions` (the gateway's; None = upload everything and let the gateway say)."""
    files: list[Path] = []
    skipped: list[Outcome] = []
    seen: set[Path] = set()
    for root in paths:
        if root.is_dir():
            candidates = sorted(
                p
                for p in root.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
            )
        elif root.is_file():
            candidates = [root]
        else:
            skipped.append(Outcome(root, "error", reason="no such file or folder"))
            continue
        for path in candidates:
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            if extensions is None or path.suffix.lower() in extensions:
                files.append(path)
            else:
                skipped.append(Outcome(path, "skipped", reason=f"unsupported extension {path.suffix or '(none)'}"))
    return files, skipped


def parse_acl(values: list[str]) -> dict[str, Any] | None:
    """The upload's ACL from --acl values: JSON (`{"departments": ["eng"]}`) or `key=a,b` pairs
    (`departments=eng,hr`, `users=bob`, `public=true`), several joined with `;` or given as repeated flags.
    Keys are the API's AclIn fields; an unknown key is an error here, before anything is uploaded."""
    if not values:
        return None
    acl: dict[str, Any] = {}
    for value in values:
        text = value.strip()
        if text.startswith("{"):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"--acl is not valid JSON: {exc.msg} at character {exc.pos}") from exc
            if not isinstance(parsed, dict):
                raise ValueError("--acl JSON must be an object")
            items = list(parsed.items())
        else:
            items = []
            for pair in filter(None, (p.strip() for p in text.split(";"))):
                key, sep, raw = pair.partition("=")
                if not sep:
                    raise ValueError(f"--acl {pair!r}: expected key=value, e.g. departments=eng,hr")
                key = key.strip()
                items.append(
                    (key, raw.strip() if key == "public" else [v.strip() for v in raw.split(",") if v.strip()])
                )
        for key, val in items:
            if key not in ACL_KEYS:
                raise ValueError(f"--acl: unknown key {key!r}; the keys are {', '.join(ACL_KEYS)}")
            if key == "public":
                acl["public"] = parse_bool(val)
            else:
                if isinstance(val, str):
                    val = [val]
                if not isinstance(val, list) or not all(isinstance(v, str) for v in val):
                    raise ValueError(f"--acl: {key} must be a list of names")
                acl[key] = [*acl.get(key, []), *val]
    return acl


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off"):
        return False
    raise ValueError(f"--acl: public must be true or false, not {value!r}")


class Ingest:
    """Uploads files at most `concurrency` at a time and, when `wait`, follows each document to the end.
    `on_done` is called once per file as it finishes (the progress bar)."""

    def __init__(
        self,
        settings: Settings,
        *,
        acl: dict[str, Any] | None,
        concurrency: int,
        wait: bool,
        wait_timeout_s: float,
        on_done: Callable[[Outcome], None] = lambda _: None,
        on_status: Callable[[Path, str], None] = lambda *_: None,
    ) -> None:
        self.settings = settings
        self.acl_json = json.dumps(acl) if acl is not None else ""
        self.uploads = asyncio.Semaphore(max(1, concurrency))
        self.followers = asyncio.Semaphore(MAX_FOLLOWERS)
        self.wait = wait
        self.wait_timeout_s = wait_timeout_s
        self.on_done = on_done
        self.on_status = on_status
        self.resume_at = 0.0  # monotonic time before which no upload starts (the gateway asked to wait)
        self.retries = 0  # uploads answered busy and tried again
        self.stop_requested = False  # read at once by the hashing thread and before each upload
        self._stopping = asyncio.Event()  # the same, for what waits in the run's loop (set on that loop)
        self._loop: asyncio.AbstractEventLoop | None = None

    def request_stop(self) -> None:
        """Stop starting uploads; those in flight finish. Safe from a signal handler, before, during or after
        `run`."""
        self.stop_requested = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stopping.set)

    async def run(self, files: list[Path]) -> list[Outcome]:
        """The outcome of every file the run got to: all of them, or after `request_stop` those finished or in
        flight at the stop. Cancelled (a second Ctrl-C), it stops at once: the outcomes reported through
        `on_done` so far are what was done."""
        self._loop = asyncio.get_running_loop()
        if self.stop_requested:
            self._stopping.set()
        transport = self.settings.transport if isinstance(self.settings.transport, httpx.AsyncBaseTransport) else None
        async with httpx.AsyncClient(
            base_url=self.settings.url,
            headers=self.settings.headers(),
            timeout=self.settings.timeout(),
            transport=transport,
        ) as http:
            hashes = await asyncio.to_thread(content_hashes, files, lambda: self.stop_requested)
            if self.stop_requested:
                return []
            try:
                present = await self.lookup(http, sorted({h for h in hashes.values() if h}))
            except Stopped:
                return []
            outcomes = await asyncio.gather(*(self.one(http, path, present.get(hashes[path], {})) for path in files))
            return [o for o in outcomes if o is not None]

    async def lookup(self, http: httpx.AsyncClient, hashes: list[str]) -> dict[str, dict[str, Any]]:
        """{hash: document} for the hashes that are already the caller's documents, not failed. Where the gateway
        has no lookup (older) or it fails, what was found so far: the rest is uploaded, and the gateway's duplicate
        check (same owner, same bytes) answers for those it already has."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(hashes), LOOKUP_BATCH):
            batch = hashes[start : start + LOOKUP_BATCH]
            try:
                response = await self.busy_aware(
                    partial(http.post, "/api/v1/documents/lookup", json={"content_sha256": batch, "mine": True})
                )
            except httpx.TransportError as exc:
                raise unreachable(self.settings.url, exc) from exc
            body = _json(response)
            if not response.is_success or not isinstance(body, dict):
                logger.warning(
                    "document lookup refused (HTTP %s: %s); uploading the files it did not answer for",
                    response.status_code,
                    error_message(body),
                )
                return found
            wanted = set(batch)
            for doc in body.get("documents", []):
                sha = str(doc.get("content_sha256", "")) if isinstance(doc, dict) else ""
                if sha in wanted and doc.get("status") != "failed":
                    found.setdefault(sha, doc)
        return found

    async def busy_aware(self, send: Callable[[], Awaitable[httpx.Response]]) -> httpx.Response:
        """`send()`'s response; while the gateway answers 429/503 with Retry-After, waits that long (every upload
        of the run waits with it) and sends again."""
        while True:
            delay = self.resume_at - time.monotonic()
            if delay > 0:
                await self.sleep_unless_stopped(delay)
            response = await send()
            wait_s = retry_after(response)
            if wait_s is None:
                return response
            self.retries += 1
            # a little jitter, so that the paused uploads do not all come back in the same instant
            self.resume_at = max(self.resume_at, time.monotonic() + wait_s + random.uniform(0, 0.25))  # noqa: S311
            logger.info("gateway busy (HTTP %s); retrying in %.1f s", response.status_code, wait_s)

    async def sleep_unless_stopped(self, seconds: float) -> None:
        """Sleeps; raises Stopped when a stop is requested meanwhile (nothing was sent: the file is not started)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)
        if self._stopping.is_set():
            raise Stopped

    async def one(self, http: httpx.AsyncClient, path: Path, present: dict[str, Any]) -> Outcome | None:
        """The file's outcome, reported through `on_done`; None for a file not started before a stop."""
        try:
            if present:
                outcome = Outcome(
                    path,
                    "present",
                    str(present.get("document_id", "")),
                    f"already ingested ({present.get('status', '?')}); not uploaded again",
                )
                if self.wait and present.get("status") not in TERMINAL:
                    outcome = await self.follow_unless_stopped(http, outcome)
                self.on_done(outcome)
                return outcome
            async with self.uploads:
                if self.stop_requested:
                    return None
                outcome = await self.upload(http, path)
            if self.wait and outcome.status == "queued":
                outcome = await self.follow_unless_stopped(http, outcome)
        except Stopped:  # waiting out the gateway's Retry-After when the stop came: never sent
            return None
        except ApiError as exc:
            outcome = Outcome(path, "error", reason=str(exc))
        except OSError as exc:
            outcome = Outcome(path, "error", reason=f"cannot read: {exc.strerror or exc}")
        except ValueError as exc:  # an event whose data is not JSON
            outcome = Outcome(path, "error", reason=f"unreadable reply: {exc}")
        self.on_done(outcome)
        return outcome

    async def upload(self, http: httpx.AsyncClient, path: Path) -> Outcome:
        content = await asyncio.to_thread(path.read_bytes)
        data = {"acl": self.acl_json} if self.acl_json else {}
        for attempt in range(TRANSPORT_RETRIES + 1):
            try:
                response = await self.busy_aware(
                    lambda: http.post("/api/v1/documents", files={"file": (path.name, content)}, data=data)
                )
                break
            except httpx.TransportError as exc:
                # safe to send again: the same bytes from the same owner are answered as a duplicate, not stored twice
                if attempt == TRANSPORT_RETRIES:
                    raise unreachable(self.settings.url, exc) from exc
                logger.info("upload of %s: %s; again in %d s", path, type(exc).__name__, 2**attempt)
                await asyncio.sleep(2**attempt)
        body = _json(response)
        if response.status_code == 415:
            return Outcome(path, "skipped", reason=error_message(body))
        if not response.is_success:
            return Outcome(path, "error", reason=f"HTTP {response.status_code}: {error_message(body)}")
        if not isinstance(body, dict):
            return Outcome(path, "error", reason=f"HTTP {response.status_code}: the reply is not JSON")
        document_id = str(body.get("document_id", ""))
        # A re-upload of identical bytes answers 200 with the existing document (202 is a new one)
        if response.status_code == 200 or body.get("duplicate"):
            return Outcome(
                path,
                "duplicate",
                document_id,
                f"same content as document {body.get('duplicate_of') or document_id} ({body.get('status', '?')})",
            )
        self.on_status(path, str(body.get("status", "queued")))
        return Outcome(path, "queued", document_id)

    async def follow_unless_stopped(self, http: httpx.AsyncClient, outcome: Outcome) -> Outcome:
        """`follow` (at most MAX_FOLLOWERS at once); after a stop request, `outcome` as it is (queued)."""
        if self._stopping.is_set():
            return outcome

        async def slot() -> Outcome:
            async with self.followers:
                return await self.follow(http, outcome)

        following, stopped = asyncio.ensure_future(slot()), asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({following, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (following, stopped):
                if not task.done():
                    task.cancel()
            await asyncio.gather(following, stopped, return_exceptions=True)
        return following.result() if following.done() and not following.cancelled() else outcome

    async def follow(self, http: httpx.AsyncClient, outcome: Outcome) -> Outcome:
        """The document's final state: from its events stream, else by polling; `still <status>` past the deadline."""
        status = "queued"
        try:
            async with asyncio.timeout(self.wait_timeout_s):
                status = await self.stream_status(http, outcome)
                while status not in TERMINAL:
                    await asyncio.sleep(POLL_INTERVAL_S)
                    status = (await self.document(http, outcome.document_id)).get("status", status)
                    self.on_status(outcome.path, status)
        except TimeoutError:
            return Outcome(outcome.path, status, outcome.document_id, f"still {status} after {self.wait_timeout_s:g} s")
        doc = await self.document(http, outcome.document_id)
        status = doc.get("status", status)
        if status == "failed":
            reason = doc.get("error") or "failed without a reason"
        else:
            reason = f"{doc.get('chunk_count', 0)} chunks"
            if doc.get("page_count"):
                reason += f", {doc['page_count']} pages"
        warnings = doc.get("warnings") or []
        if warnings:
            reason += "; " + "; ".join(str(w) for w in warnings)
        return Outcome(outcome.path, status, outcome.document_id, reason)

    async def stream_status(self, http: httpx.AsyncClient, outcome: Outcome) -> str:
        """The last status the events stream reported; where the stream is missing or breaks, the caller polls."""
        status = "queued"
        path = f"/api/v1/documents/{outcome.document_id}/events"
        try:
            async with http.stream("GET", path) as response:
                if response.status_code in (404, 405, 501):
                    logger.info("no events stream for %s (HTTP %s); polling", outcome.document_id, response.status_code)
                    return status
                if not response.is_success:
                    await response.aread()
                    raise ApiError(response.status_code, error_message(_json(response)))
                lines: list[str] = []
                async for line in response.aiter_lines():
                    lines.append(line)
                    if line:
                        continue
                    for _, data in sse_events(lines):
                        status = str(data.get("status", status))
                        self.on_status(outcome.path, status)
                    lines = []
                    if status in TERMINAL:
                        return status
        except httpx.TransportError as exc:
            logger.info("events stream of %s broke (%s); polling", outcome.document_id, type(exc).__name__)
        return status

    async def document(self, http: httpx.AsyncClient, document_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.settings.timeout_s
        while True:
            try:
                response = await http.get(f"/api/v1/documents/{document_id}")
            except httpx.TransportError as exc:
                if time.monotonic() > deadline:
                    raise unreachable(self.settings.url, exc) from exc
                await asyncio.sleep(POLL_INTERVAL_S)
                continue
            body = _json(response)
            if not response.is_success:
                raise ApiError(response.status_code, error_message(body))
            return dict(body)


def content_hashes(files: list[Path], stopped: Callable[[], bool] = lambda: False) -> dict[Path, str]:
    """Each file's hex SHA-256 (streamed, not read whole); "" for one that cannot be read (its upload says why).
    Ends early, incomplete, once `stopped()`."""
    hashes: dict[Path, str] = {}
    for path in files:
        if stopped():
            break
        try:
            with path.open("rb") as handle:
                hashes[path] = hashlib.file_digest(handle, "sha256").hexdigest()
        except OSError:
            hashes[path] = ""
    return hashes


def retry_after(response: httpx.Response) -> float | None:
    """Seconds to wait before sending again when the gateway is busy (429/503 with Retry-After in seconds, at
    most MAX_RETRY_AFTER_S); None for any other answer, which is the file's outcome."""
    if response.status_code not in BUSY_STATUSES:
        return None
    value = response.headers.get("Retry-After", "").strip()
    try:
        seconds = float(value)
    except ValueError:
        return None  # absent, or an HTTP date (the gateway sends seconds)
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text.strip() or response.reason_phrase

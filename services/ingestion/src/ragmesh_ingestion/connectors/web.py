"""The web source: a crawl from seed URLs and sitemaps, on the connector's allowed hosts only.

- Allowed hosts: every URL fetched (seeds, sitemap entries, links, and each hop of a redirect, which is followed by
  hand and checked again) must be http(s) on one of the connector's `allowed_hosts`; anything else is never
  requested, so the crawler cannot be pointed at an internal address the administrator did not name.
- robots.txt (RFC 9309, read with urllib.robotparser): fetched once per origin; a URL it disallows for the
  connector's user agent is skipped. A robots.txt that is missing (4xx) allows everything, one that cannot be read
  (5xx, timeout) disallows everything. `<meta name="robots">` noindex and nofollow are honoured too.
- Depth: links are followed up to `max_depth` from a seed or sitemap entry.
- Incremental: a page ingested before is asked for with If-None-Match / If-Modified-Since (a 304 is unchanged
  without a download) and else compared by content hash; every page ingested before is asked for again, so one
  that answers 404 or 410 is deleted. A page no longer linked but still served stays.
- Bounds: each request has `timeout_seconds` from start to last byte; a page larger than `max_page_bytes` is
  skipped; a run makes at most `max_pages` requests and reads at most `max_run_bytes`.
"""

from __future__ import annotations

import codecs
import mimetypes
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import httpx
from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from ragmesh_common.connectors import ItemState, WebConfig, host_allowed
from ragmesh_common.formats import BY_NAME, EXTENSIONS, MIME_TYPES
from ragmesh_ingestion.connectors.base import (
    Failed,
    Fetched,
    Gone,
    NotModified,
    Outcome,
    Scan,
    Skipped,
    content_problem,
    safe_filename,
)

MAX_REDIRECTS = 5
MAX_SITEMAP_NESTING = 2
MAX_LINKS_PER_PAGE = 1000
MAX_ROBOTS_BYTES = 512 * 1024
DISALLOW_ALL = ["User-agent: *", "Disallow: /"]


class _Cap(Exception):
    """The run's request or byte budget is spent."""


@dataclass
class _Response:
    url: str  # after redirects
    status: int
    headers: httpx.Headers
    body: bytes


class _Refused(Exception):
    """A request the crawler will not make or finish (reason in the message)."""

    def __init__(self, reason: str, *, skipped: bool = False) -> None:
        super().__init__(reason)
        self.skipped = skipped


class _PageParser(HTMLParser):
    """Links, title and robots meta of an HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.title = ""
        self.noindex = False
        self.nofollow = False
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k.lower(): v or "" for k, v in attrs}
        if tag == "a" and values.get("href") and len(self.links) < MAX_LINKS_PER_PAGE:
            if "nofollow" not in values.get("rel", "").lower():
                self.links.append(values["href"])
        elif tag == "meta" and values.get("name", "").lower() == "robots":
            content = values.get("content", "").lower()
            self.noindex = self.noindex or "noindex" in content or "none" in content
            self.nofollow = self.nofollow or "nofollow" in content or "none" in content
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title and len(self.title) < 300:
            self.title += data


def normal_url(url: str) -> str:
    """The URL without its fragment, scheme and host in lower case."""
    url = urldefrag(url)[0]
    parts = urlsplit(url)
    return parts._replace(scheme=parts.scheme.lower(), netloc=parts.netloc.lower(), path=parts.path or "/").geturl()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def charset(content_type: str) -> str:
    """The charset a Content-Type names, if Python knows it; else UTF-8."""
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            try:
                return codecs.lookup(value.strip().strip('"')).name
            except LookupError:
                break
    return "utf-8"


def page_filename(url: str, mime_type: str) -> str | None:
    """A file name for the page whose extension the format registry knows, or None for an unsupported type."""
    name = PurePosixPath(urlsplit(url).path).name or "index"
    suffix = PurePosixPath(name).suffix.lower().lstrip(".")
    fmt = MIME_TYPES.get(mime_type)
    if fmt is None:
        if mime_type and mime_type not in ("application/octet-stream", "binary/octet-stream"):
            return None
        fmt = EXTENSIONS.get(suffix)
        if fmt is None:
            return None
    if EXTENSIONS.get(suffix) != fmt:
        name = f"{name}.{BY_NAME[fmt].extensions[0]}"
    return safe_filename(name)


class WebSource:
    def __init__(self, config: WebConfig, default_acl: dict[str, Any], transport: httpx.BaseTransport | None = None):
        self.config = config
        self.acl = default_acl
        self._transport = transport  # tests: a mock transport; default: the network
        self._robots: dict[str, RobotFileParser] = {}
        self._requests = 0
        self._bytes = 0

    # ---------- HTTP ----------
    def _client(self) -> httpx.Client:
        return httpx.Client(
            timeout=httpx.Timeout(self.config.timeout_seconds),
            follow_redirects=False,  # each hop is checked against the allowed hosts (_get)
            headers={"User-Agent": self.config.user_agent},
            trust_env=False,  # no proxy or netrc from the worker's environment
            transport=self._transport,
        )

    def _read(self, client: httpx.Client, url: str, headers: dict[str, str], limit: int) -> _Response:
        deadline = time.monotonic() + self.config.timeout_seconds
        with client.stream("GET", url, headers=headers) as reply:
            body = bytearray()
            if not reply.is_redirect:
                for chunk in reply.iter_bytes():
                    body += chunk
                    if len(body) > limit:
                        raise _Refused(f"larger than {limit} bytes", skipped=True)
                    if time.monotonic() > deadline:
                        raise _Refused(f"no complete answer within {self.config.timeout_seconds:g}s")
            self._bytes += len(body)
            return _Response(str(reply.url), reply.status_code, reply.headers, bytes(body))

    def _get(self, client: httpx.Client, url: str, headers: dict[str, str] | None = None) -> _Response:
        """GET `url`, following up to MAX_REDIRECTS redirects, each hop allowed by host and robots.txt."""
        for hop in range(MAX_REDIRECTS + 1):
            if not host_allowed(url, self.config.allowed_hosts):
                where = "redirected to" if hop else "the URL"
                raise _Refused(f"{where} {url} is not on an allowed host", skipped=not hop)
            if not self._robots_allow(client, url):
                raise _Refused(f"{url} is disallowed by robots.txt", skipped=True)
            if self._requests >= self.config.max_pages or self._bytes >= self.config.max_run_bytes:
                raise _Cap()
            self._requests += 1
            try:
                reply = self._read(client, url, headers or {}, self.config.max_page_bytes)
            except httpx.HTTPError as exc:
                raise _Refused(f"request failed: {type(exc).__name__}: {exc}"[:300]) from None
            if reply.status not in (301, 302, 303, 307, 308):
                return reply
            location = reply.headers.get("location", "")
            if not location:
                raise _Refused(f"HTTP {reply.status} without a Location")
            url = normal_url(urljoin(url, location))
        raise _Refused(f"more than {MAX_REDIRECTS} redirects")

    def _robots_allow(self, client: httpx.Client, url: str) -> bool:
        origin = _origin(url)
        parser = self._robots.get(origin)
        if parser is None:
            parser = RobotFileParser()
            try:
                reply = self._read(client, f"{origin}/robots.txt", {}, MAX_ROBOTS_BYTES)
            except (httpx.HTTPError, _Refused):
                parser.parse(DISALLOW_ALL)  # unreachable: RFC 9309 says assume complete disallow
            else:
                if 200 <= reply.status < 300:
                    parser.parse(reply.body.decode("utf-8", "replace").splitlines())
                elif reply.status >= 500:
                    parser.parse(DISALLOW_ALL)
                else:  # 3xx (not followed) and 4xx: no rules
                    parser.parse([])
            self._robots[origin] = parser
        return parser.can_fetch(self.config.user_agent, url)

    # ---------- the crawl ----------
    def _sitemap_urls(self, client: httpx.Client, url: str, scan: Scan, nesting: int = 0) -> list[str]:
        try:
            reply = self._get(client, url)
        except _Refused as exc:
            scan.problems.append(f"sitemap {url}: {exc}")
            return []
        if reply.status != 200:
            scan.problems.append(f"sitemap {url}: HTTP {reply.status}")
            return []
        try:
            root = ElementTree.fromstring(reply.body)
        except (ElementTree.ParseError, DefusedXmlException) as exc:
            scan.problems.append(f"sitemap {url}: not a sitemap ({type(exc).__name__})")
            return []
        locs = [(el.text or "").strip() for el in root.iter() if str(el.tag).rsplit("}", 1)[-1] == "loc"]
        if str(root.tag).endswith("sitemapindex"):
            if nesting >= MAX_SITEMAP_NESTING:
                scan.problems.append(f"sitemap {url}: nested deeper than {MAX_SITEMAP_NESTING}")
                return []
            found: list[str] = []
            for loc in locs:
                found += self._sitemap_urls(client, normal_url(urljoin(url, loc)), scan, nesting + 1)
            return found
        return [normal_url(urljoin(url, loc)) for loc in locs if loc]

    def scan(self, known: Mapping[str, ItemState], scan: Scan) -> Iterator[Outcome]:
        scan.complete = False  # a crawl never proves that a page is gone: only a 404 or 410 does
        queue: deque[tuple[str, int]] = deque()
        seen: set[str] = set()

        def push(url: str, depth: int) -> None:
            if url not in seen:
                seen.add(url)
                queue.append((url, depth))

        with self._client() as client:
            try:
                for seed in self.config.seeds:
                    push(normal_url(seed), 0)
                for sitemap in self.config.sitemaps:
                    for url in self._sitemap_urls(client, normal_url(sitemap), scan):
                        push(url, 0)
                for second in (False, True):
                    if second:  # pages ingested before and not met by the crawl: asked again (changed? gone?)
                        for key in sorted(known):
                            push(key, self.config.max_depth)
                    while queue:
                        url, depth = queue.popleft()
                        outcome, links = self._page(client, url, known.get(url))
                        yield outcome
                        if depth < self.config.max_depth:
                            for link in links:
                                if host_allowed(link, self.config.allowed_hosts):
                                    push(link, depth + 1)
            except _Cap:
                scan.problems.append(
                    f"stopped at the run's limit ({self.config.max_pages} requests, {self.config.max_run_bytes} bytes); "
                    f"{len(queue) + 1} pages left for the next run"
                )

    def _page(self, client: httpx.Client, url: str, state: ItemState | None) -> tuple[Outcome, list[str]]:
        headers = {}
        if state is not None and state.document_id:
            if state.etag:
                headers["If-None-Match"] = state.etag
            if state.last_modified:
                headers["If-Modified-Since"] = state.last_modified
        try:
            reply = self._get(client, url, headers)
        except _Refused as exc:
            return (Skipped(url, str(exc)) if exc.skipped else Failed(url, str(exc))), []
        if reply.status == 304 and state is not None:
            return NotModified(url, self.acl), []
        if reply.status in (404, 410):
            return (Gone(url) if state is not None else Skipped(url, f"HTTP {reply.status}")), []
        if reply.status != 200:
            return Failed(url, f"HTTP {reply.status}"), []
        mime_type = reply.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if not mime_type:
            mime_type = mimetypes.guess_type(urlsplit(reply.url).path)[0] or ""
        filename = page_filename(reply.url, mime_type)
        if filename is None:
            return Skipped(url, f"unsupported content type {mime_type or '(none)'}"), []
        title, links = "", []  # a page without a <title>: the catalogue titles it by its file name
        if MIME_TYPES.get(mime_type) == "html" or filename.endswith((".html", ".htm")):
            page = _PageParser()
            try:
                page.feed(reply.body.decode(charset(reply.headers.get("content-type", "")), "replace"))
                page.close()
            except (AssertionError, ValueError):  # html.parser on broken markup
                pass
            if page.noindex:
                return (Gone(url) if state is not None else Skipped(url, "robots meta noindex")), []
            if not page.nofollow:
                links = [normal_url(urljoin(reply.url, href)) for href in page.links]
            title = " ".join(page.title.split()) or title
        problem = content_problem(filename, reply.body, mime_type)
        if problem:
            return Skipped(url, problem), links
        return (
            Fetched(
                url,
                filename,
                mime_type,
                title[:200],
                reply.body,
                self.acl,
                etag=reply.headers.get("etag", ""),
                last_modified=reply.headers.get("last-modified", ""),
            ),
            links,
        )

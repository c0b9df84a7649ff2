"""The web connector's crawler against local HTTP servers started here (never the internet): robots.txt, depth,
the host allow-list (links and redirects to other hosts are never requested), sitemap seeds, conditional GET,
404 as deletion, the page cap and the per-request timeout."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ragmesh_common.connectors import ItemState, WebConfig
from ragmesh_dev.websites import Site
from ragmesh_dev.websites import serve as _serve
from ragmesh_ingestion.connectors.base import Failed, Fetched, Gone, NotModified, Outcome, Scan, Skipped
from ragmesh_ingestion.connectors.web import WebSource

ACL = {"public": False, "departments": ["eng"], "roles": [], "users": []}


@pytest.fixture
def sites() -> Iterator[tuple[Site, Site]]:
    """Two sites on two ports: the first is allowed, the second never is."""
    first, second = Site(), Site()
    servers = [_serve(first), _serve(second)]
    try:
        yield first, second
    finally:
        for server, _ in servers:
            server.shutdown()
            server.server_close()


def crawl(site: Site, known: dict[str, ItemState] | None = None, **config: Any) -> tuple[list[Outcome], Scan]:
    settings = {"seeds": [f"{site.base}/"], "allowed_hosts": [f"127.0.0.1:{site.port}"], **config}
    scan = Scan()
    outcomes = list(WebSource(WebConfig(**settings), ACL).scan(known or {}, scan))
    return outcomes, scan


def by_key(outcomes: list[Outcome]) -> dict[str, Outcome]:
    return {o.key: o for o in outcomes}


def test_follows_links_to_max_depth_and_obeys_robots(sites: tuple[Site, Site]) -> None:
    site, _ = sites
    site.pages["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private\n")
    site.html("/", '<title>Home</title><a href="/a">a</a> <a href="/private/x">secret</a>')
    site.html("/a", '<a href="/b">b</a>')
    site.html("/b", '<a href="/c">c</a>')
    site.html("/c", "<p>too deep</p>")
    site.html("/private/x", "<p>never fetched</p>")
    outcomes, _ = crawl(site, max_depth=2)
    found = by_key(outcomes)
    assert {k for k, o in found.items() if isinstance(o, Fetched)} == {
        f"{site.base}/",
        f"{site.base}/a",
        f"{site.base}/b",
    }
    home = found[f"{site.base}/"]
    assert isinstance(home, Fetched) and home.title == "Home" and home.filename.endswith(".html")
    assert isinstance(found[f"{site.base}/private/x"], Skipped)
    assert "robots.txt" in found[f"{site.base}/private/x"].reason  # type: ignore[union-attr]
    assert not site.requested("/private/x") and not site.requested("/c")


def test_never_requests_hosts_off_the_allow_list(sites: tuple[Site, Site]) -> None:
    site, other = sites
    other.html("/", "<p>internal</p>")
    site.html("/", f'<a href="{other.base}/">elsewhere</a> <a href="/hop">hop</a>')
    site.pages["/hop"] = (302, {"Location": f"{other.base}/"}, b"")
    outcomes, _ = crawl(site)
    hop = by_key(outcomes)[f"{site.base}/hop"]
    assert isinstance(hop, Failed) and "not on an allowed host" in hop.reason
    assert other.log == []  # neither the link nor the redirect reached the other server


def test_redirects_on_the_allow_list_are_followed(sites: tuple[Site, Site]) -> None:
    site, _ = sites
    site.html("/", '<a href="/old">old</a>')
    site.pages["/old"] = (301, {"Location": "/new"}, b"")
    site.pages["/new"] = (
        200,
        {"Content-Type": "text/html; charset=latin-1"},
        "<title>Caf\xe9</title>moved here".encode("latin-1"),
    )
    found = by_key(crawl(site)[0])
    moved = found[f"{site.base}/old"]
    assert isinstance(moved, Fetched) and b"moved here" in moved.content and moved.title == "Caf\xe9"


def test_sitemap_seeds_and_conditional_get(sites: tuple[Site, Site]) -> None:
    site, _ = sites
    sitemap = (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{site.base}/one</loc></url><url><loc>{site.base}/two</loc></url></urlset>"
    )
    site.pages["/sitemap.xml"] = (200, {"Content-Type": "application/xml"}, sitemap.encode())
    site.html("/one", "<p>one</p>", ETag='"v1"')
    site.html("/two", "<p>two</p>")
    config = {"seeds": [], "sitemaps": [f"{site.base}/sitemap.xml"], "max_depth": 0}
    first = by_key(crawl(site, **config)[0])
    one = first[f"{site.base}/one"]
    assert isinstance(one, Fetched) and one.etag == '"v1"' and isinstance(first[f"{site.base}/two"], Fetched)

    known = {
        f"{site.base}/one": ItemState(f"{site.base}/one", "x", '"v1"', "", ACL, "doc-1"),
        f"{site.base}/gone": ItemState(f"{site.base}/gone", "y", "", "", ACL, "doc-2"),
    }
    site.log.clear()
    second = by_key(crawl(site, known, **config)[0])
    assert isinstance(second[f"{site.base}/one"], NotModified)
    asked = [h for p, h in site.log if p == "/one"]
    assert asked and asked[0].get("if-none-match") == '"v1"'
    assert isinstance(second[f"{site.base}/gone"], Gone)  # a page ingested before now answers 404


def test_page_cap_and_timeouts_are_reported(sites: tuple[Site, Site]) -> None:
    site, _ = sites
    site.html("/", "".join(f'<a href="/p{i}">p</a>' for i in range(10)) + '<a href="/slow">s</a>')
    for i in range(10):
        site.html(f"/p{i}", f"<p>page {i}</p>")
    outcomes, scan = crawl(site, max_pages=3)
    assert len([o for o in outcomes if isinstance(o, Fetched)]) == 3
    assert any("limit" in p for p in scan.problems)

    slow = Site()
    server, _ = _serve(slow)
    try:
        slow.html("/", "<p>late</p>")
        slow.delay["/"] = 3.0
        outcomes, _ = crawl(slow, timeout_seconds=0.5)
        assert len(outcomes) == 1 and isinstance(outcomes[0], Failed)
    finally:
        server.shutdown()
        server.server_close()


def test_unreachable_robots_disallows_and_unsupported_types_are_skipped(sites: tuple[Site, Site]) -> None:
    site, _ = sites
    site.pages["/robots.txt"] = (503, {}, b"")
    site.html("/", "<p>x</p>")
    outcomes, _ = crawl(site)
    assert len(outcomes) == 1 and isinstance(outcomes[0], Skipped) and "robots" in outcomes[0].reason
    del site.pages["/robots.txt"]

    other = Site()
    server, _ = _serve(other)
    try:
        other.html("/", '<a href="/file.bin">bin</a>')
        other.pages["/file.bin"] = (200, {"Content-Type": "application/x-msdownload"}, b"MZ\x00\x00")
        found = by_key(crawl(other)[0])
        assert isinstance(found[f"{other.base}/file.bin"], Skipped)
    finally:
        server.shutdown()
        server.server_close()


def test_config_refuses_seeds_off_the_allow_list() -> None:
    with pytest.raises(ValueError, match="not on an allowed host"):
        WebConfig(seeds=["http://169.254.169.254/latest"], allowed_hosts=["example.com"])
    with pytest.raises(ValueError, match="http"):
        WebConfig(seeds=["file:///etc/passwd"], allowed_hosts=["example.com"])

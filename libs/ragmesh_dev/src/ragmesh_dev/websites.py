"""A small web site on a loopback port for tests of the web connector (never the internet): pages by path with their
status and headers, ETag / If-None-Match answered with 304, a delay per path, and a log of every request."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Site:
    """A tiny web site: path -> (status, headers, body); every request's path and headers are logged."""

    pages: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    log: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    delay: dict[str, float] = field(default_factory=dict)
    port: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def html(self, path: str, body: str, **headers: str) -> None:
        self.pages[path] = (200, {"Content-Type": "text/html; charset=utf-8", **headers}, body.encode())

    def requested(self, path: str) -> bool:
        return any(p == path for p, _ in self.log)


def serve(site: Site) -> tuple[ThreadingHTTPServer, threading.Thread]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            site.log.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
            if self.path in site.delay:
                time.sleep(site.delay[self.path])
            status, headers, body = site.pages.get(self.path, (404, {"Content-Type": "text/plain"}, b"not found"))
            etag = headers.get("ETag")
            if etag and self.headers.get("If-None-Match") == etag:
                status, body = 304, b""
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    site.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread

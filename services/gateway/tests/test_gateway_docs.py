"""`/docs` (Swagger UI) and `/redoc` (ReDoc) work offline: every script, style and icon they load comes from the
gateway itself (the pinned fastapi-offline package), none from a CDN."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).parent))  # the bad-input tests' fakes (tests run in importlib mode)
from test_gateway_bad_input import FakeMesh, settings

from ragmesh_gateway.app import create_app


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_api_docs_load_only_from_the_gateway(tmp_path: Path, page: str) -> None:
    with TestClient(create_app(settings(tmp_path), mesh=FakeMesh())) as client:
        html = client.get(page)
        assert html.status_code == 200 and "text/html" in html.headers["content-type"]
        loaded = re.findall(r"""(?:src|href)=["']([^"']+)["']|url:\s*["']([^"']+)["']""", html.text)
        urls = [a or b for a, b in loaded]
        assert urls and not [u for u in urls if u.startswith(("http:", "https:", "//"))], urls
        assert "cdn" not in html.text.lower()
        for url in urls:
            asset = client.get(url)
            assert asset.status_code == 200 and len(asset.content) > 1000, url

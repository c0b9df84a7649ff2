"""The operator's dashboard in a real headless Chromium (npm @sparticuz/chromium + playwright-core, installed
into tests/e2e/dashboard/node_modules at test time; no root, no system browser): sign in with the admin token,
filter the traces by user and by errors, open a trace (waterfall, attributes, the request), read the per-step
percentiles, sign out. The session is an HttpOnly cookie: the page's script never sees it, and nothing is kept
in localStorage or the URL.

Skipped, with the reason, where `node`/`npm` is missing or the npm registry cannot be reached. With
RAGMESH_DASHBOARD_SCREENSHOTS=<folder> the screenshots go there (docs/ holds the committed ones)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from ragmesh_dev.devstack import Stack

from .conftest import auth

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent / "dashboard"
INSTALL_SECONDS = 600.0
BROWSE_SECONDS = 600.0
TRACES_SECONDS = 60.0  # spans reach rag_traces within the exporters' batch delay; this bounds the wait


@pytest.fixture(scope="module")
def browser_kit() -> Path:
    """node_modules with the pinned Chromium and playwright-core (npm ci from the committed lockfile)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("the dashboard's browser test needs node and npm on PATH")
    if not (HERE / "node_modules" / "playwright-core").is_dir():
        try:
            done = subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund"],
                cwd=HERE,
                capture_output=True,
                text=True,
                timeout=INSTALL_SECONDS,
            )
        except subprocess.TimeoutExpired:
            pytest.skip("npm ci did not finish (is the npm registry reachable?)")
        if done.returncode != 0:
            pytest.skip(f"npm ci failed (is the npm registry reachable?): {done.stderr[-500:]}")
    return HERE


def test_an_operator_signs_in_filters_opens_a_trace_and_reads_percentiles(
    mesh: Stack, client: httpx.Client, browser_kit: Path, tmp_path: Path
) -> None:
    user = "dash-viewer"
    asker = mesh.token(user, "dash-nobody", ["employee"])  # no document is readable: quick answers, no model
    admin = mesh.token("dash-admin", "ops", ["admin"])
    assert client.post("/api/v1/search", json={"query": "travel policy"}, headers=auth(asker)).status_code == 200
    for question in ("What is our travel policy?", "Who approves vacation?"):  # the newest trace: a chat
        assert client.post("/api/v1/chat", json={"question": question}, headers=auth(asker)).status_code == 200
    deadline = time.monotonic() + TRACES_SECONDS
    while time.monotonic() < deadline:
        listed = client.get("/api/v1/traces", params={"user": user}, headers=auth(admin)).json()["traces"]
        if len(listed) >= 3:
            break
        time.sleep(0.5)
    assert len(listed) >= 3, listed

    shots = Path(os.environ.get("RAGMESH_DASHBOARD_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["node", "browse.mjs", mesh.gateway_url, admin, user, str(shots.resolve())],
        cwd=browser_kit,
        capture_output=True,
        text=True,
        timeout=BROWSE_SECONDS,
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0 and "error" not in seen, seen.get("error") or done.stderr[-3000:]

    assert seen["who"] == "dash-admin"
    assert seen["sessionCookie"] == [{"httpOnly": True, "sameSite": "Strict"}]
    assert "ragmesh_admin_session" not in seen["cookieVisibleToScript"]  # HttpOnly: no script reads it
    assert seen["localStorage"] == {"local": 0, "session": 0}
    assert all(admin not in url for url in seen["requests"]), "the token appeared in a URL"
    assert admin not in seen["url"]
    assert set(seen["filteredUsers"]) == {user} and len(seen["filteredUsers"]) >= 3
    assert len(seen["spans"]) >= 2 and "status" in seen["attributes"]
    assert any(a.startswith("rag.") for a in seen["attributes"]), seen["attributes"]
    assert seen["requestUser"] == user and "outcome" in seen["request"]
    assert seen["chartBars"] >= 3  # p50, p95, p99 of at least one step
    rows = {(r[0], r[1]): r for r in seen["percentileRows"]}
    assert any(service == "gateway" for service, _ in rows), rows
    for row in rows.values():
        p50, p95, p99 = (float(v) for v in row[5:8])
        assert 0 <= p50 <= p95 <= p99
    assert seen["feedback"] and not any(row["error"] for row in seen["feedback"]), seen["feedback"]
    assert seen["problems"] and not any(row["error"] for row in seen["problems"]), seen["problems"]
    assert re.fullmatch(r"Ingestion backlog: \d+ tasks? waiting for a worker", seen["backlog"]), seen["backlog"]
    assert seen["signedOut"] is True
    for name in ("dashboard-traces.png", "dashboard-trace.png", "dashboard-latency.png"):
        assert (shots / name).stat().st_size > 10_000

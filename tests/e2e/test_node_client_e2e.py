"""A Node.js client on the real mesh (tests/node/client.mjs: @grpc/grpc-js + @grpc/proto-loader on proto/, the
token minted in JavaScript from proto/README.md, no Python): with the dev stack's per-caller key it embeds a query,
searches with the vector and with `embed_query` (the retriever forwards its token to the embedder), sees only
what its user may read, and is refused without a token, with a token for another service, with an expired
token, and for a service its key is not registered for.

Runs when `node` and `npm` are installed; the two npm packages (pinned in tests/node/package-lock.json) are
installed into tests/node/node_modules (gitignored) on the first run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragmesh_dev.devstack import DEV_CALLER, Stack

from .conftest import upload_ready

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / "tests" / "node"
WORD = "quokkabridge"  # a word only this test's document has


@pytest.fixture(scope="module")
def node() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are not installed: the Node.js client test needs them (apt-get install nodejs npm)")
    if not (NODE_DIR / "node_modules" / "@grpc" / "grpc-js").is_dir():
        try:
            result = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
                cwd=NODE_DIR,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.skip("npm ci did not finish within 600 s (is the npm registry reachable?)")
        if result.returncode != 0:
            pytest.skip(f"npm ci failed (is the npm registry reachable?): {result.stderr.strip()[-500:]}")
    return node


@pytest.fixture(scope="module")
def document(mesh: Stack, client: httpx.Client, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("node") / "bridge.md"
    path.write_text(f"# Bridges\n\nThe {WORD} spans the river at Leipzig and opened in 1998.\n")
    return upload_ready(client, mesh.token("alice", "eng", ["employee"]), path)


def run_client(node: str, mesh: Stack, user: dict[str, Any]) -> dict[str, Any]:
    config = {
        "proto": str(ROOT / "proto"),
        "embedder": mesh.addr("embedder"),
        "retriever": mesh.addr("retriever"),
        "answerer": mesh.addr("answerer"),
        "caller": DEV_CALLER,
        "private_key": mesh.caller_keys()[0],
        "user": user,
        "query": f"When did the {WORD} open?",
    }
    result = subprocess.run(
        [node, "client.mjs"], cwd=NODE_DIR, input=json.dumps(config), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def test_a_node_client_calls_the_embedder_and_the_retriever_with_its_own_key(
    node: str, mesh: Stack, document: str
) -> None:
    out = run_client(node, mesh, {"sub": "alice", "department": "eng", "roles": ["employee"]})
    assert out["embed"]["dimension"] == 384, out
    assert document in out["search"]["document_ids"], out
    assert document in out["forwarded"]["document_ids"] and out["forwarded"]["vector_unavailable"] == "", out
    refused = out["refused"]
    assert {case["code"] for case in refused.values()} == {"UNAUTHENTICATED"}, refused
    assert "may not mint tokens for ragmesh-answerer" in refused["not_allowed"]["details"]
    assert "not for this service" in refused["other_audience"]["details"]
    assert "expired" in refused["expired"]["details"]


def test_the_node_client_sees_only_what_its_user_may_read(node: str, mesh: Stack, document: str) -> None:
    out = run_client(node, mesh, {"sub": "mallory", "department": "sales", "roles": ["employee"]})
    assert document not in out["search"]["document_ids"] and document not in out["forwarded"]["document_ids"], out

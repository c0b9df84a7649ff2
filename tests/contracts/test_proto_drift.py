"""The committed stubs are exactly what proto/ generates (regenerate with `make proto`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "libs" / "ragmesh_common" / "src"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "tools" / "gen_proto.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_proto"] = module
    spec.loader.exec_module(module)
    return module


def test_generated_stubs_match_proto_sources(tmp_path: Path) -> None:
    _generator().generate(tmp_path)
    fresh = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.joinpath("ragmesh").rglob("*") if p.is_file()}
    committed = {
        p.relative_to(COMMITTED): p.read_bytes()
        for p in COMMITTED.joinpath("ragmesh").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert fresh.keys() == committed.keys(), "stub files differ from proto/: run `make proto`"
    stale = sorted(str(k) for k in fresh if fresh[k] != committed[k])
    assert not stale, f"stubs out of date with proto/ (run `make proto`): {stale}"


def test_every_service_proto_is_versioned_and_has_a_service() -> None:
    for service in ("parser", "embedder", "retriever", "reranker", "graph", "answerer"):
        text = (ROOT / "proto" / "ragmesh" / service / "v1" / f"{service}.proto").read_text()
        assert f"package ragmesh.{service}.v1;" in text
        assert "service " in text

"""`make bench-ingest` in its smallest size, so that it cannot break silently (at one point it imported the dev stack
from a module that had moved and failed at once): three short texts and a two-page PDF through its own mesh, every
document ready, the report written with the ratio to the raw model rate; and 30 small files through
`ragmesh ingest`, interrupted, resumed and run again (`--bulk`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"


def test_bench_ingest_runs_in_its_smallest_size(tmp_path: Path) -> None:
    if not (DATA / "beir_scifact" / "corpus.jsonl").is_file() or not (DATA / "squad_v1.1_dev").is_dir():
        pytest.skip(f"the bench's data (SciFact, SQuAD) is not at {DATA}")
    out = tmp_path / "ingest.json"
    args = ["--short", "3", "--pdf-pages", "2", "--uploaders", "2", "--timeout", "900", "--bulk", "30"]
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ingest.py"), *args, "--out", str(out), "--work-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(out.read_text())
    short, pdf = report["short"], report["pdf"]
    assert short["documents"] == 3 and short["statuses"] == {"ready": 3} and not short["timed_out"]
    assert short["paragraph_chunks"] >= 3 and short["ratio_to_raw"] > 0
    assert pdf["pages"] == 2 and pdf["statuses"] == {"ready": 1} and pdf["paragraph_chunks"] >= 1
    assert report["raw"]["texts"] == 3 and report["raw"]["texts_per_s"] > 0
    assert report["raw_embedded"]["cpu_seconds"] > 0 and short["raw_cpu_to_mesh_cpu"] > 0
    bulk = report["bulk"]  # ragmesh ingest of 30 files, interrupted (or done first), resumed, run again
    assert bulk["interrupted"]["exit_code"] in (0, 130) and not bulk["interrupted"]["traceback"]
    assert bulk["resumed"]["exit_code"] == 0 and bulk["again"]["exit_code"] == 0
    assert bulk["resumed"]["catalogue"]["documents"] == bulk["resumed"]["catalogue"]["distinct_contents"] == 30
    assert bulk["again"]["statuses"] == {"present": 30}

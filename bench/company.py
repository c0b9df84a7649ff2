"""Company documents: questions about the shared sample files (PDF, DOCX, XLSX, HTML), asked through a running mesh.

    make run                                                   # in another shell: the mesh on loopback
    export RAGMESH_TOKEN=$(make -s token user=bench-company department=company-bench roles=employee)
    ragmesh ingest --wait --acl departments=company-bench ../shared/data/documents/{pdf,html,docx,pptx,xlsx,md,csv}/sources
    python bench/company.py --output bench/results/company-stop58.json

SQuAD and HotpotQA are Wikipedia prose, the span reader's own domain. A company's files are manuals, reports,
spreadsheets and slides: commands in capitals, values like "*CHANGE", rows found by a product and a date. The
questions (`bench/data/company_questions.jsonl`, 27 with an answer in the named file, 3 without) were written at
stop 58 after the answer path's fixes for the defects found by using the product, and never tuned on: they are a
held-out check that "verified" holds on documents that are not Wikipedia. Each is asked once (`cache: false`)
over everything the token's user may read (ingest the whole sources folders, as above: the other files are the
distractors). Scored with bench/answer.py's own rules (`answered`, `trusted`): answered = an answer that is not
withheld; false-grounded = answered and presented as trustworthy (grounded, verified, no warning), with the
short answer below F1 0.5 against every gold and no gold in the answer (any answered question without an answer
in the documents); beside it, wrong short answers (answered, short answer below F1
0.5): the sentence shown may hold the gold while the short answer a user reads first does not. Writes the
per-question rows and the totals as JSON; `--rescore FILE` recomputes the totals of a results file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from answer import F1_WRONG, answered, contains_gold, exact_match, token_f1, trusted

QUESTIONS = Path(__file__).resolve().parent / "data" / "company_questions.jsonl"


def score(question: dict[str, Any], final: dict[str, Any]) -> dict[str, Any]:
    """One question's row: what the user was shown and how it scores against the golds."""
    golds = list(question["answers"])
    given = answered(final)
    short = str(final.get("short_answer") or "") if given else ""
    text = str(final.get("answer") or "")
    em = max((exact_match(short, g) for g in golds), default=0.0)
    f1 = max((token_f1(short, g) for g in golds), default=0.0)
    wrong = given and (not golds or (f1 < F1_WRONG and not contains_gold(text, golds)))
    return {
        "id": question["id"],
        "question": question["question"],
        "golds": golds,
        "outcome": final.get("outcome"),
        "answered": given,
        "verified": bool(final.get("verified")),
        "short_answer": short,
        "em": em,
        "f1": f1,
        "false_grounded": wrong and trusted(final),
        "wrong_with_warning": wrong and not trusted(final),
    }


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [r for r in rows if r["golds"]]
    answered = [r for r in rows if r["answered"]]
    grounded_wrong = sum(r["false_grounded"] for r in rows)
    # the short answer itself wrong (a user reads it first), though the sentence shown may hold the gold
    wrong_short = sum(r["answered"] and (not r["golds"] or r["f1"] < F1_WRONG) for r in rows)
    return {
        "questions": len(rows),
        "answerable": len(answerable),
        "answered": len(answered),
        "answered_over_answerable": round(sum(r["answered"] for r in answerable) / len(answerable), 4)
        if answerable
        else None,
        "false_grounded": grounded_wrong,
        "false_grounded_over_answered": round(grounded_wrong / len(answered), 4) if answered else None,
        "wrong_short_answers": wrong_short,
        "wrong_short_over_answered": round(wrong_short / len(answered), 4) if answered else None,
        "unanswerable_answered": sum(r["answered"] for r in rows if not r["golds"]),
        "exact_match_over_answerable": round(sum(r["em"] for r in answerable) / len(answerable), 4)
        if answerable
        else None,
        "f1_over_answerable": round(sum(r["f1"] for r in answerable) / len(answerable), 4) if answerable else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="company documents: questions through a running mesh")
    parser.add_argument("--url", default=os.environ.get("RAGMESH_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--token", default=os.environ.get("RAGMESH_TOKEN"), help="bearer JWT (RAGMESH_TOKEN)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds one chat may take")
    parser.add_argument("--output", default=None, help="write rows and totals here (JSON)")
    parser.add_argument("--rescore", default=None, help="recompute the totals of this results file and exit")
    parser.add_argument(
        "--questions", default=str(QUESTIONS), help="a JSONL file of questions (stop 59's: a second set)"
    )
    args = parser.parse_args()
    if args.rescore:
        kept = json.loads(Path(args.rescore).read_text())
        kept["totals"] = totals(kept["rows"])
        Path(args.rescore).write_text(json.dumps(kept, indent=1) + "\n")
        print(json.dumps(kept["totals"], indent=1))
        return
    if not args.token:
        raise SystemExit("a token is needed: --token or RAGMESH_TOKEN (make -s token user=… department=…)")
    questions = [json.loads(line) for line in Path(args.questions).read_text().splitlines() if line.strip()]
    rows = []
    started = time.monotonic()
    with httpx.Client(base_url=args.url, headers={"Authorization": f"Bearer {args.token}"}) as client:
        for q in questions:
            reply = client.post("/api/v1/chat", json={"question": q["question"], "cache": False}, timeout=args.timeout)
            reply.raise_for_status()
            row = score(q, reply.json())
            rows.append(row)
            mark = "WRONG, verified" if row["false_grounded"] else ("answered" if row["answered"] else "withheld")
            print(f"{q['id']:9} {mark:16} F1 {row['f1']:.2f}  {q['question']}  →  {row['short_answer']!r}")
    report = {
        "command": "python bench/company.py " + " ".join(sys.argv[1:]),
        "seconds": round(time.monotonic() - started, 1),
        "totals": totals(rows),
        "rows": rows,
    }
    print(json.dumps(report["totals"], indent=1))
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()

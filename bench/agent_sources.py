"""Sources of multi-step answers: which passages a chat gives the answerer, direct vs agentic, on HotpotQA.

    python bench/agent_sources.py                                  # HotpotQA 100, both modes, a fresh mesh
    python bench/agent_sources.py --data-dir /tmp/answer-stack     # reuse bench/answer.py's uploads

bench/answer.py measures the same quantity (`all_gold_in_sources`: both gold passages among the sources of the
final event) end to end, but every question there also waits for the CPU model's answer, which on a loaded
2-core machine is a minute per question. The sources are decided before the answer step, in the chat's
`prepare` (guardrail, understand, plan, retrieve → rerank → grade or iterate with its tools, budget), so this
bench starts the same mesh, uploads the same corpus (bench/answer.py's loader, manifest and halves), and runs
the gateway's own pipeline in-process: `open_runtime` with the gateway's settings builds the Orchestrator the
gateway serves with, against the mesh's services, as the bench user (an internal token the mesh trusts). The
sources scored are `state.results[:top_k]`: what the answer call would be given. The cache is off (each
question is planned and searched). The planner's model fallback (the answerer's Rewrite) still runs.

Per mode and per half (tuning / reporting, bench/answer.py's split by question id): both gold passages in the
sources, at least one, the outcome counts, steps and tool calls per question, and the time of `prepare`
(retrieval and steps, no generation). Writes bench/results/agent-sources.json. Benchmarks are not tests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import answer as A  # the answer benchmark's corpus, manifest, halves and scoring
import retrieval as bench  # log


def gold_found(question: A.Question, texts: list[str], corpus: A.Corpus) -> tuple[bool, bool]:
    """(every gold passage, at least one) among the texts, by bench/answer.py's passage test."""
    golds = [corpus.passage_tokens.get(p, []) for p in question.gold_passages]
    found = {i for text in texts for i, tokens in enumerate(golds) if A.from_passage(text, tokens)}
    return bool(golds) and found >= set(range(len(golds))), bool(found)


async def ask(orchestrator: Any, user: Any, question: A.Question, mode: str, corpus: A.Corpus) -> dict[str, Any]:
    from ragmesh_gateway.mesh import StepFailed
    from ragmesh_gateway.models import ChatRequest

    request = ChatRequest(question=question.text, mode=mode, cache=False)  # type: ignore[arg-type]
    started = time.perf_counter()
    row: dict[str, Any] = {"id": question.qid, "half": A.half(question.qid), "mode": mode}
    try:
        state = await orchestrator.prepare(user, request)
    except StepFailed as failed:
        row.update(outcome=f"failed:{failed.step}", both=False, any=False, seconds=time.perf_counter() - started)
        return row
    sources = state.results[: request.top_k] if state.answering else []
    both, some = gold_found(question, [s.chunk.text for s in sources], corpus)
    tools = [s.get("tool", "search") for s in state.agent_steps]
    row.update(
        outcome=state.outcome.value,
        both=both,
        any=some,
        seconds=time.perf_counter() - started,
        steps=len(state.agent_steps),
        tool_calls=sum(1 for t in tools if t != "search"),
        llm_tokens=state.llm_tokens,
        sources=[s.chunk.title for s in sources],
        plan=list(state.sub_questions),
    )
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    return {
        "questions": len(rows),
        "all_gold_in_sources": round(statistics.fmean(r["both"] for r in rows), 4),
        "gold_in_sources": round(statistics.fmean(r["any"] for r in rows), 4),
        "steps_mean": round(statistics.fmean(r.get("steps", 0) for r in rows), 2),
        "tool_calls_mean": round(statistics.fmean(r.get("tool_calls", 0) for r in rows), 2),
        "prepare_p50_s": round(statistics.median(r["seconds"] for r in rows), 3),
        "prepare_mean_s": round(statistics.fmean(r["seconds"] for r in rows), 3),
        "outcomes": outcomes,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from ragmesh_common.context import UserContext
    from ragmesh_dev.devstack import DEFAULT_PORTS, Stack
    from ragmesh_dev.ports import free_port
    from ragmesh_gateway.config import Settings
    from ragmesh_gateway.runtime import open_runtime

    questions, corpus = A.hotpot_questions(Path(args.eval_dir).resolve(), args.hotpot)
    if args.half:  # tuning runs: one half only (the corpus stays whole)
        questions = [q for q in questions if A.half(q.qid) == args.half]
    keep = args.data_dir is not None
    work = Path(args.data_dir).resolve() if keep else Path(tempfile.mkdtemp(prefix="ragmesh-agent-sources-"))
    work.mkdir(parents=True, exist_ok=True)
    stack = Stack(work, ports={n: free_port() for n in DEFAULT_PORTS}, extra_env={"GATEWAY_RATE_LIMIT_PER_MINUTE": "0"})
    api = A.Api("")
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    try:
        bench.log(f"starting the mesh in {work}")
        stack.start(timeout=600)
        api = A.Api(stack.gateway_url)
        await api.open()
        tokens = {
            "squad": stack.token("bench-squad", A.SQUAD_DEPARTMENT),
            "hotpotqa": stack.token("bench-hotpot", A.HOTPOT_DEPARTMENT),
        }
        ingestion = await A.ingest(api, tokens, corpus.uploads, work / A.MANIFEST)
        bench.log(f"ingestion: {ingestion}")
        os.environ.update(stack.env("gateway"))  # the gateway's own settings, as the mesh started it
        settings = Settings.from_env()
        user = UserContext("bench-hotpot", A.HOTPOT_DEPARTMENT, (), signer=stack.internal_signer("gateway"))
        async with open_runtime(settings) as runtime:
            for mode in args.modes:
                for i, question in enumerate(questions):
                    rows.append(await ask(runtime.orchestrator, user, question, mode, corpus))
                    if (i + 1) % 10 == 0:
                        bench.log(f"{mode}: {i + 1}/{len(questions)}")
    finally:
        await api.close()
        stack.stop()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    report: dict[str, Any] = {}
    for mode in args.modes:
        mine = [r for r in rows if r["mode"] == mode]
        report[f"hotpotqa/{mode}"] = summarise(mine)
        for part in ("tuning", "reporting"):
            some = [r for r in mine if r["half"] == part]
            if some:
                report[f"hotpotqa/{mode}/{part}"] = summarise(some)
    report["meta"] = {
        "command": " ".join(sys.argv),
        "hotpotqa": len(questions),
        "hotpotqa_passages": len(corpus.uploads),
        "modes": args.modes,
        "ingestion": ingestion,
        "wall_seconds": round(time.perf_counter() - started, 1),
        "cpu_cores": os.cpu_count(),
        "load_average_1min_end": round(os.getloadavg()[0], 2),
        "settings": "embedded defaults (SmolLM2-135M-Instruct for the guardrail and the planner's fallback, "
        "all-MiniLM-L6-v2, no reranker model); the gateway's pipeline in-process; cache off; no answer generated",
    }
    if args.details:
        Path(args.details).write_text("".join(A.json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return report


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description="sources of direct and agentic chats on HotpotQA, no generation")
    parser.add_argument("--hotpot", type=int, default=100, help="HotpotQA questions, in file order")
    parser.add_argument("--mode", default="direct,agentic", help="chat modes, a comma list")
    parser.add_argument("--half", choices=("tuning", "reporting"), default=None, help="ask one half only")
    parser.add_argument("--data-dir", default=None, help="the mesh's data folder (bench/answer.py's is reused)")
    parser.add_argument("--eval-dir", default=str(root.parent / "shared" / "data"))
    parser.add_argument("--output", default=str(root / "bench" / "results" / "agent-sources.json"))
    parser.add_argument("--details", default=None, help="also write one JSON line per question and mode here")
    args = parser.parse_args()
    args.modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    if not args.modes or any(m not in ("auto", "direct", "agentic") for m in args.modes) or args.hotpot < 1:
        parser.error("--mode: auto, direct, agentic or a comma list of them; --hotpot >= 1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from ragmesh_dev.devstack import interrupt_on_sigterm

    interrupt_on_sigterm()
    report = asyncio.run(run(args))
    Path(args.output).write_text(A.json.dumps(report, indent=1) + "\n")
    for name, summary in report.items():
        if name != "meta":
            bench.log(f"{name}: {summary}")
    bench.log(f"wrote {args.output}")


if __name__ == "__main__":
    main()

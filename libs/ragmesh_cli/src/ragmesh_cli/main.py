"""The `ragmesh` command: ingest, ask, chat, search, graph, docs, conversations, traces and token, over the gateway's
HTTP API.

Configuration comes from flags or the environment: --url / RAGMESH_URL (default http://127.0.0.1:8080) and
--token / RAGMESH_TOKEN. An error from the API is one line on stderr (`error: HTTP 404: …`) and exit code 1.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ragmesh_cli import render
from ragmesh_cli.client import DEFAULT_URL, Api, ApiError, Settings
from ragmesh_cli.ingest import Ingest, Outcome, accepted_extensions, collect, outcome_json, parse_acl


def _options(command: Any) -> dict[str, Any]:
    """A command's options by flag (`--url` → its parameter); typer vendors click, so this is duck-typed."""
    return {opt: p for p in getattr(command, "params", ()) for opt in getattr(p, "opts", ()) if opt.startswith("-")}


def _leaf(group: Any, args: list[str]) -> Any:
    """The command `args` names, walking subcommands and skipping each level's options (and their values)."""
    command = group
    tokens = iter(args)
    for token in tokens:
        if token == "--":
            break
        if token.startswith("-"):
            option = _options(command).get(token)
            if option is not None and not getattr(option, "is_flag", False) and "=" not in token:
                next(tokens, None)  # its value
            continue
        subcommands = getattr(command, "commands", None)
        if not isinstance(subcommands, dict):
            break  # a leaf's argument
        if token not in subcommands:
            return None
        command = subcommands[token]
    return command


class JsonAnywhere(typer.core.TyperGroup):
    """`--json` anywhere on the line (`ragmesh --json docs list`, `ragmesh docs --json list`) means the command's
    own `--json`: scripts put it where they like. A command without JSON output still refuses it, by name."""

    def main(self, args: Any = None, *rest: Any, **kwargs: Any) -> Any:
        argv = [str(a) for a in (sys.argv[1:] if args is None else args)]
        end = argv.index("--") if "--" in argv else len(argv)
        head, tail = argv[:end], argv[end:]
        if "--json" in head:
            stripped = [a for a in head if a != "--json"]
            leaf = _leaf(self, stripped)
            if leaf is not None and "--json" in _options(leaf):
                argv = [*stripped, "--json", *tail]
        return super().main(argv, *rest, **kwargs)


app = typer.Typer(
    name="ragmesh",
    cls=JsonAnywhere,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="ragmesh from the command line: ingest files, ask, search, manage documents, read traces.",
)
docs_app = typer.Typer(no_args_is_help=True, help="List, show and delete documents you may read.")
traces_app = typer.Typer(invoke_without_command=True, help="Recent request traces (admin); `traces show ID` for one.")
cache_app = typer.Typer(
    invoke_without_command=True, help="The semantic cache's counters (admin); `cache clear` empties it."
)
conversations_app = typer.Typer(
    no_args_is_help=True, help="Your conversations kept on the server: list, show, rm, export (rated turns)."
)
app.add_typer(docs_app, name="docs")
app.add_typer(conversations_app, name="conversations")
app.add_typer(traces_app, name="traces")
app.add_typer(cache_app, name="cache")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the API's JSON instead of a table (for scripts)")]


@dataclass
class State:
    settings: Settings
    out: Console
    err: Console


@app.callback()
def configure(
    ctx: typer.Context,
    url: Annotated[str, typer.Option(envvar="RAGMESH_URL", help="Gateway base URL")] = DEFAULT_URL,
    token: Annotated[
        str,
        typer.Option(envvar="RAGMESH_TOKEN", show_default=False, help="Bearer JWT (`ragmesh token` mints a dev one)"),
    ] = "",
    timeout: Annotated[float, typer.Option(min=1, help="Seconds to wait for any one reply")] = 60.0,
) -> None:
    # tests hand in a transport through `obj`; everyone else talks to the network
    transport = ctx.obj.get("transport") if isinstance(ctx.obj, dict) else None
    ctx.obj = State(
        Settings(url=url.rstrip("/"), token=token.strip(), timeout_s=timeout, transport=transport),
        Console(highlight=False),
        Console(stderr=True, highlight=False, soft_wrap=True),
    )


def state(ctx: typer.Context) -> State:
    return ctx.find_root().obj  # type: ignore[no-any-return]  # click types ctx.obj as Any; the root callback sets it


@contextmanager
def failing_clearly(st: State) -> Iterator[None]:
    """An API or input error as one line on stderr and exit code 1, never a traceback."""
    try:
        yield
    except ApiError as exc:
        st.err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None
    except ValueError as exc:
        st.err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None


def print_json(st: State, data: Any) -> None:
    """Plain JSON on stdout (colored only on a terminal), so that scripts can pipe it to jq."""
    if st.out.is_terminal:
        st.out.print_json(json.dumps(data))
    else:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")


# ---------- ingest ----------
class Interrupts:
    """Ctrl-C for a long command, installed for all of it (so that no Ctrl-C meets Python's default handler
    between two phases): the first calls `on_first` (stop cleanly), a second aborts (KeyboardInterrupt)."""

    def __init__(self) -> None:
        self.count = 0
        self.on_first: Callable[[], None] = lambda: None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.count > 1:
            raise KeyboardInterrupt
        self.on_first()

    @contextmanager
    def installed(self) -> Iterator[Interrupts]:
        if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
            yield self
            return
        previous = signal.signal(signal.SIGINT, self)
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, previous)


def upload_with_progress(
    st: State,
    files: list[Path],
    skipped: list[Outcome],
    interrupts: Interrupts,
    acl_fields: dict[str, Any] | None,
    concurrency: int,
    wait: bool,
    wait_timeout: float,
) -> list[Outcome]:
    """`ragmesh ingest`'s uploads under one progress bar; the outcomes of the files done. The first Ctrl-C lets
    the uploads in flight finish (so that the outcomes list every document created), a second one aborts."""
    for line in render.skipped_lines(skipped):
        st.err.print(f"[dim]{line}[/]")
    outcomes: list[Outcome] = []
    if not files:
        return outcomes
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    counts: Counter[str] = Counter()
    with Progress(*columns, console=st.err, transient=False) as progress:
        verb = "ingesting" if wait else "uploading"
        task = progress.add_task(verb, total=len(files))

        def done(outcome: Outcome) -> None:
            outcomes.append(outcome)
            counts[outcome.status] += 1
            progress.update(task, advance=1, description=f"{verb} ({render.status_counts(counts)})")

        runner = Ingest(
            st.settings, acl=acl_fields, concurrency=concurrency, wait=wait, wait_timeout_s=wait_timeout, on_done=done
        )

        def stop() -> None:
            runner.request_stop()
            verb_now = "stopping: finishing the uploads in flight (Ctrl-C again to abort)"
            progress.update(task, description=verb_now)

        interrupts.on_first = stop
        try:
            with failing_clearly(st):
                asyncio.run(runner.run(files))
        except KeyboardInterrupt:  # the second Ctrl-C: asyncio.run cancelled the uploads; `outcomes` is what finished
            interrupts.count = max(interrupts.count, 1)
    return outcomes


@app.command()
def ingest(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help="Files and folders (walked recursively)")],
    acl: Annotated[
        list[str] | None,
        typer.Option(
            help='Who may read: JSON {"departments": ["eng"]} or departments=eng,hr;users=bob;public=false '
            "(repeatable). Default: your department"
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=32, help="Uploads at once")] = 4,
    wait: Annotated[bool, typer.Option("--wait", help="Follow each document until ready or failed")] = False,
    wait_timeout: Annotated[float, typer.Option(min=1, help="Seconds to wait per document with --wait")] = 900,
    as_json: JsonFlag = False,
) -> None:
    """Upload files and folders (parallel, one progress bar); a summary of ready / failed / duplicate at the end.
    Files already among your documents (same bytes) are not sent again, so after Ctrl-C (exit code 130) the same
    command resumes where it stopped."""
    st = state(ctx)
    with Interrupts().installed() as interrupts:
        try:
            with failing_clearly(st):
                acl_fields = parse_acl(acl or [])
                extensions = asyncio.run(accepted_extensions(st.settings))
            files, skipped = collect(paths, extensions)
        except KeyboardInterrupt:  # a second Ctrl-C
            interrupts.count = max(interrupts.count, 1)
        if interrupts.count:  # before anything was sent
            st.err.print("[yellow]interrupted:[/] nothing uploaded")
            raise typer.Exit(130)
        outcomes = upload_with_progress(st, files, skipped, interrupts, acl_fields, concurrency, wait, wait_timeout)
        results = outcomes + skipped
        if as_json:
            print_json(st, [outcome_json(o) for o in results])
        else:
            render.ingest_summary(st.out, results)
        if interrupts.count:
            st.err.print(
                f"[yellow]interrupted:[/] {len(outcomes)} of {len(files)} files done; run the same command again "
                "to resume (files already ingested are not uploaded again)"
            )
            raise typer.Exit(130)
    if not files:
        st.err.print("[red]error:[/] no supported files to upload")
        raise typer.Exit(1)
    if not all(o.ok for o in results):
        raise typer.Exit(1)


# ---------- ask / search ----------
@app.command()
def ask(
    ctx: typer.Context,
    question: Annotated[str, typer.Argument(help="Your question")],
    top_k: Annotated[int, typer.Option(min=1, max=20, help="Sources given to the answerer")] = 5,
    document: Annotated[
        list[str] | None, typer.Option("--document", "-d", help="Only these document ids (repeatable)")
    ] = None,
    graph: Annotated[bool, typer.Option(help="Use knowledge-graph facts")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the final event's JSON only")] = False,
) -> None:
    """Ask a question: each answer sentence shows once it is verified, then the sources and verification.

    Only verified sentences are printed as they stream (the gateway's `sentence` events); the model's
    unverified draft is never put on screen, so nothing shown has to be taken back. When nothing verified,
    the final answer ("what the documents say", marked unverified) is printed at the end."""
    st = state(ctx)
    body = {"question": question, "stream": True, "top_k": top_k, "document_ids": document or [], "graph": graph}
    with Api(st.settings) as api:
        stream_answer(st, api, body, as_json)


def stream_answer(st: State, api: Api, body: dict[str, Any], as_json: bool) -> dict[str, Any]:
    """Streams a chat's answer to stdout (or prints its final JSON), then its sources and checks; the final
    event's data. An API error is one line on stderr and exit code 1."""
    final: dict[str, Any] | None = None
    shown: list[str] = []
    status = st.err.status("retrieving…") if st.err.is_terminal and not as_json else None
    if status:
        status.start()
    try:
        with failing_clearly(st):
            for name, data in api.stream("POST", "/api/v1/chat", body):
                if name == "sentence" and not as_json:
                    if status:
                        status.stop()
                    text = str(data.get("text", ""))
                    gap = "" if not shown else "\n" if text.startswith("- ") else " "  # a list's items: a line each
                    st.out.print(gap + text, end="", markup=False, highlight=False, soft_wrap=True)
                    shown.append(text)
                elif name == "progress":
                    if data.get("status") == "queued":
                        st.err.print(
                            f"[dim]queued at position {data.get('position')} "
                            f"(about {data.get('estimated_wait_s')} s)[/]"
                        )
                    elif status:
                        status.update(f"{data.get('stage', '')} {data.get('status', '')}…")
                elif name == "error":
                    raise ApiError(data.get("status"), render_step_error(data))
                elif name == "final":
                    final = data
    finally:
        if status:
            status.stop()
    if final is None:
        if shown:
            st.out.print()
        st.err.print("[red]error:[/] the answer stream ended without a final event")
        raise typer.Exit(1)
    if as_json:
        print_json(st, final)
        return final
    answer = str(final.get("answer", ""))
    if not shown:
        st.out.print(answer, markup=False, highlight=False)
    elif " ".join(shown).split() != answer.split():  # cannot happen with this gateway; the final one is authoritative
        st.out.print("\n" + answer, markup=False, highlight=False)
    else:
        st.out.print()
    render.answer_footer(st.out, final)
    return final


@app.command()
def chat(
    ctx: typer.Context,
    conversation: Annotated[
        str | None, typer.Option("--conversation", "-c", help="Go on with this conversation (default: a new one)")
    ] = None,
    title: Annotated[str, typer.Option(help="A new conversation's title (default: the first question)")] = "",
    top_k: Annotated[int, typer.Option(min=1, max=20, help="Sources given to the answerer")] = 5,
) -> None:
    """Chat interactively in a conversation the server keeps: each line is a question (follow-ups are understood
    from the stored turns); `/up [comment]` or `/down [comment]` rates the last answer; an empty line or EOF ends."""
    st = state(ctx)
    with Api(st.settings) as api:
        with failing_clearly(st):
            if conversation:
                conversation_id = api.get(f"/api/v1/conversations/{conversation}")["conversation_id"]
            else:
                conversation_id = api.post("/api/v1/conversations", {"title": title})["conversation_id"]
        st.err.print(f"[dim]conversation {conversation_id} (ragmesh conversations show {conversation_id})[/]")
        last_message: str | None = None
        while True:
            if st.err.is_terminal:
                st.err.print("[bold]> [/]", end="")
            line = sys.stdin.readline()
            question = line.strip()
            if not question:
                return
            command, _, comment = question.partition(" ")
            if command in ("/up", "/down"):
                if last_message is None:
                    st.err.print("[yellow]note:[/] no stored answer to rate yet")
                    continue
                with failing_clearly(st):
                    api.post(
                        f"/api/v1/conversations/{conversation_id}/messages/{last_message}/feedback",
                        {"rating": command[1:], "comment": comment.strip()},
                    )
                st.err.print(f"[dim]rated {command[1:]}[/]")
                continue
            body = {"question": question, "stream": True, "top_k": top_k, "conversation_id": conversation_id}
            final = stream_answer(st, api, body, as_json=False)
            last_message = final.get("message_id") or last_message


def render_step_error(data: dict[str, Any]) -> str:
    message = f"{data['step']}: {data.get('message', '')}" if data.get("step") else str(data.get("message", ""))
    return message + (f" (retry after {data['retry_after']} s)" if data.get("retry_after") else "")


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for")],
    top_k: Annotated[int, typer.Option(min=1, max=100)] = 10,
    rerank: Annotated[bool, typer.Option(help="Rerank with the cross-encoder")] = False,
    document: Annotated[list[str] | None, typer.Option("--document", "-d", help="Only these document ids")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Permission-aware hybrid search: the chunks that match, without an answer."""
    st = state(ctx)
    with failing_clearly(st), Api(st.settings) as api:
        body = api.post(
            "/api/v1/search", {"query": query, "top_k": top_k, "rerank": rerank, "document_ids": document or []}
        )
    if as_json:
        print_json(st, body)
    else:
        render.search_table(st.out, body)


@app.command()
def graph(
    ctx: typer.Context,
    entity: Annotated[str, typer.Argument(help="An entity's name, or part of it")],
    as_json: JsonFlag = False,
) -> None:
    """An entity from the knowledge graph: its facts, neighbours, communities and mentions (readable only)."""
    st = state(ctx)
    with failing_clearly(st), Api(st.settings) as api:
        found = api.get("/api/v1/graph/entities", {"q": entity, "limit": 10})
        if not found["entities"]:
            st.err.print(f"no entity matching {entity!r} in the documents you can read")
            raise typer.Exit(1)
        detail = api.get(f"/api/v1/graph/entities/{found['entities'][0]['id']}")
    if as_json:
        print_json(st, {"matches": found["entities"], **detail})
    else:
        render.graph_entity(st.out, detail, [e["name"] for e in found["entities"][1:]])


# ---------- docs ----------
@docs_app.command("list")
def docs_list(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option(help="queued, parsing, embedding, indexing, ready, failed")] = None,
    owner: Annotated[str | None, typer.Option(help="Owner user id")] = None,
    format: Annotated[str | None, typer.Option("--format", help="e.g. pdf, md")] = None,
    updated_since: Annotated[str | None, typer.Option(help="ISO 8601 time")] = None,
    cursor: Annotated[str | None, typer.Option(help="Next page, from the previous listing")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 100,
    offset: Annotated[int | None, typer.Option(min=0)] = None,
    mine: Annotated[bool, typer.Option("--mine", help="Only your own documents")] = False,
    stale: Annotated[
        bool, typer.Option("--stale", help="Only documents an older parser read (`docs reingest --stale` redoes them)")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """The documents you may read. Filters are passed to the server as given."""
    st = state(ctx)
    params = {
        "status": status,
        "owner": owner,
        "mine": "true" if mine else None,
        "stale": "true" if stale else None,
        "format": format,
        "updated_since": updated_since,
        "cursor": cursor,
        "limit": limit,
        "offset": offset,
    }
    with failing_clearly(st), Api(st.settings) as api:
        body = api.get("/api/v1/documents", params)
    # A server without the filters ignores them (unknown query parameters are not errors): say so
    docs = body.get("documents") or []
    ignored = [
        name
        for name, value, field in (("--status", status, "status"), ("--owner", owner, "owner_user"))
        if value and any(d.get(field) != value for d in docs)
    ]
    if ignored:
        st.err.print(f"[yellow]note:[/] this server ignored {', '.join(ignored)}; the list is unfiltered")
    if as_json:
        print_json(st, body)
    else:
        render.documents_table(st.out, body)


@docs_app.command("show")
def docs_show(
    ctx: typer.Context,
    document_id: Annotated[str, typer.Argument(metavar="ID")],
    chunks: Annotated[bool, typer.Option(help="Also list the document's chunks")] = True,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Chunks per page")] = 20,
    cursor: Annotated[str | None, typer.Option(help="Chunks page, from the previous call")] = None,
    as_json: JsonFlag = False,
) -> None:
    """One document's details and (where the server has the endpoint) its chunks."""
    st = state(ctx)
    chunk_page: Any = None
    unavailable = False
    with failing_clearly(st), Api(st.settings) as api:
        doc = api.get(f"/api/v1/documents/{document_id}")
        if chunks:
            try:
                chunk_page = api.get(f"/api/v1/documents/{document_id}/chunks", {"limit": limit, "cursor": cursor})
            except ApiError as exc:
                if exc.status not in (404, 405):
                    raise
                unavailable = True
    if as_json:
        print_json(st, {"document": doc, "chunks": chunk_page})
        return
    render.document_details(st.out, doc)
    if unavailable:
        st.out.print("chunks: not available on this server")
    elif chunk_page is not None:
        render.chunks_table(st.out, chunk_page)


@docs_app.command("rm")
def docs_rm(ctx: typer.Context, document_ids: Annotated[list[str], typer.Argument(metavar="ID...")]) -> None:
    """Delete documents you own (each is tried; exit code 1 if any failed)."""
    st = state(ctx)

    def delete(api: Api, document_id: str) -> None:
        body = api.delete(f"/api/v1/documents/{document_id}")
        st.out.print(f"deleted {document_id}")
        for warning in body.get("warnings") or []:
            st.err.print(f"[yellow]warning[/] {escape(document_id)}: {escape(str(warning))}")

    each_or_exit(st, document_ids, delete)


@docs_app.command("reingest")
def docs_reingest(
    ctx: typer.Context,
    document_ids: Annotated[list[str] | None, typer.Argument(metavar="[ID...]")] = None,
    stale: Annotated[
        bool, typer.Option("--stale", help="All your documents an older parser read (`docs list --stale --mine`)")
    ] = False,
) -> None:
    """Parse and index documents you own again from their stored files (after a parser upgrade: a newer parser
    reads more of a file); each stays searchable meanwhile. Each is tried; exit code 1 if any failed."""
    st = state(ctx)
    ids = list(document_ids or [])
    if stale:
        with failing_clearly(st), Api(st.settings) as api:
            ids += [i for i in stale_documents(api) if i not in ids]
        if not ids:
            st.out.print("no stale documents: the parser has read each of yours as it now would")
            return
        st.out.print(f"re-ingesting {len(ids)} documents")
    elif not ids:
        st.err.print("[red]error:[/] name documents (ID...) or pass --stale")
        raise typer.Exit(2)

    def reingest(api: Api, document_id: str) -> None:
        body = api.post(f"/api/v1/documents/{document_id}/reingest", {})
        st.out.print(f"{document_id}: {escape(str(body.get('note') or 'queued'))}")

    each_or_exit(st, ids, reingest)


def stale_documents(api: Api) -> list[str]:
    """The ids of your documents an older parser read, every page."""
    ids: list[str] = []
    cursor: str | None = None
    while True:
        body = api.get("/api/v1/documents", {"stale": "true", "mine": "true", "limit": 1000, "cursor": cursor})
        ids += [str(d["document_id"]) for d in body.get("documents") or []]
        cursor = body.get("next_cursor") or None
        if cursor is None:
            return ids


def each_or_exit(st: State, ids: list[str], act: Callable[[Api, str], None]) -> None:
    """`act` on each id in turn; a refusal is one line on stderr and the next is tried; exit code 1 if any was."""
    failed = 0
    with Api(st.settings) as api:
        for item in ids:
            try:
                act(api, item)
            except ApiError as exc:
                st.err.print(f"[red]error:[/] {escape(item)}: {escape(str(exc))}")
                failed += 1
    if failed:
        raise typer.Exit(1)


# ---------- conversations ----------
@conversations_app.command("list")
def conversations_list(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 50,
    cursor: Annotated[str | None, typer.Option(help="Next page, from the previous listing")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Your conversations, most recently active first."""
    st = state(ctx)
    with failing_clearly(st), Api(st.settings) as api:
        body = api.get("/api/v1/conversations", {"limit": limit, "cursor": cursor})
    if as_json:
        print_json(st, body)
    else:
        render.conversations_table(st.out, body)


@conversations_app.command("show")
def conversations_show(
    ctx: typer.Context, conversation_id: Annotated[str, typer.Argument(metavar="ID")], as_json: JsonFlag = False
) -> None:
    """One conversation's turns (an answer whose document you can no longer read shows as withdrawn)."""
    st = state(ctx)
    with failing_clearly(st), Api(st.settings) as api:
        body = api.get(f"/api/v1/conversations/{conversation_id}")
    if as_json:
        print_json(st, body)
    else:
        render.conversation_details(st.out, body)


@conversations_app.command("rm")
def conversations_rm(
    ctx: typer.Context, conversation_ids: Annotated[list[str], typer.Argument(metavar="ID...")]
) -> None:
    """Delete conversations of yours with their turns and feedback (exit code 1 if any failed)."""
    st = state(ctx)

    def delete(api: Api, conversation_id: str) -> None:
        api.delete(f"/api/v1/conversations/{conversation_id}")
        st.out.print(f"deleted {conversation_id}")

    each_or_exit(st, conversation_ids, delete)


@conversations_app.command("export")
def conversations_export(
    ctx: typer.Context,
    rating: Annotated[str, typer.Option(help="up, down or any")] = "down",
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 1000,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="JSON Lines file (default: stdout)")] = None,
) -> None:
    """Your rated turns as an evaluation set, one JSON object a line: question, answer, sources (document id,
    title, chunk id, snippet), rating, comment, trace id. Turns whose documents you can no longer read are
    withdrawn by the server and left out (counted on stderr)."""
    st = state(ctx)
    if rating not in ("up", "down", "any"):
        st.err.print("[red]error:[/] --rating must be up, down or any")
        raise typer.Exit(2)
    params: dict[str, Any] = {"limit": limit} | ({} if rating == "any" else {"rating": rating})
    with failing_clearly(st), Api(st.settings) as api:
        messages = api.get("/api/v1/conversations/rated", params)["messages"]
    cases = [export_case(m) for m in messages if not m.get("withdrawn")]
    lines = "".join(json.dumps(case, ensure_ascii=False) + "\n" for case in cases)
    if output is None:
        sys.stdout.write(lines)
    else:
        output.write_text(lines, encoding="utf-8")
    withdrawn = len(messages) - len(cases)
    st.err.print(f"{len(cases)} cases" + (f"; {withdrawn} withdrawn turns left out" if withdrawn else ""))


def export_case(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "question": message["question"],
        "answer": message["answer"],
        "sources": [
            {k: source.get(k) for k in ("document_id", "title", "chunk_id", "section_path", "page", "snippet")}
            for source in message.get("sources") or []
        ],
        "rating": message["rating"],
        "comment": message["comment"],
        "trace_id": message["trace_id"],
        "message_id": message["message_id"],
        "conversation_id": message["conversation_id"],
    }


# ---------- traces ----------
@traces_app.callback()
def traces(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 50,
    hours: Annotated[int, typer.Option(min=1, max=720, help="How far back")] = 24,
    name: Annotated[str | None, typer.Option(help="Root span name contains")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Recent request traces (needs the admin role)."""
    if ctx.invoked_subcommand is not None:
        return
    st = state(ctx)
    with failing_clearly(st), Api(st.settings) as api:
        body = api.get("/api/v1/traces", {"limit": limit, "hours": hours, "name": name})
    if as_json:
        print_json(st, body)
    else:
        render.traces_table(st.out, body)


@traces_app.command("show")
def traces_show(
    ctx: typer.Context, trace_id: Annotated[str, typer.Argument(metavar="TRACE_ID")], as_json: JsonFlag = False
) -> None:
    """All spans of one trace, as a tree."""
    st = state(ctx)
    with failing_clearly(st), Api(st.settings) as api:
        body = api.get(f"/api/v1/traces/{trace_id.strip().lower()}")
    if as_json:
        print_json(st, body)
    else:
        render.trace_spans(st.out, body)


# ---------- cache ----------
@cache_app.callback()
def cache(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """The semantic cache's hit rate, entries and counters, all gateways together (needs the admin role)."""
    if ctx.invoked_subcommand is not None:
        return
    st = state(ctx)
    with failing_clearly(st), Api(st.settings) as api:
        body = api.get("/api/v1/admin/cache")
    if as_json:
        print_json(st, body)
        return
    if not body.get("enabled"):
        st.out.print("the semantic cache is off (GATEWAY_CACHE_ENABLED)")
        return
    rate = body.get("hit_rate")
    st.out.print(
        f"{body['entries']} entries; hit rate {'-' if rate is None else f'{rate:.1%}'} "
        f"({body['hits']} hits, {body['misses']} misses); {body['stores']} stored, {body['refused']} refused, "
        f"{body['invalidated']} invalidated, {body.get('cleared', 0)} cleared, {body['errors']} errors"
    )


@cache_app.command("clear")
def cache_clear(ctx: typer.Context) -> None:
    """Drop every cached answer, every user's (after an upgrade of the model or the answer path; no document
    changes: the next question is answered anew)."""
    st = state(ctx)
    with failing_clearly(st), Api(st.settings) as api:
        body = api.delete("/api/v1/admin/cache")
    st.out.print(f"{body['cleared']} cached answers dropped")


# ---------- token ----------
@app.command()
def token(
    ctx: typer.Context,
    user: Annotated[str, typer.Option(help="The user id (claim sub)")],
    department: Annotated[str, typer.Option()] = "",
    roles: Annotated[str, typer.Option(help="Comma-separated, e.g. employee,admin")] = "",
    ttl: Annotated[int, typer.Option(min=60, help="Lifetime in seconds")] = 8 * 3600,
    data_dir: Annotated[
        Path, typer.Option(envvar="RAGMESH_DATA_DIR", help="The dev stack's data folder (its signing key)")
    ] = Path(".data"),
) -> None:
    """Mint a local development JWT, as `make token` does (GATEWAY_JWT_SECRET, else the dev stack's key)."""
    st = state(ctx)
    if not user.strip():
        st.err.print("[red]error:[/] --user must not be empty")
        raise typer.Exit(2)
    from ragmesh_cli.tokens import dev_secret, mint

    try:
        secret = os.environ.get("GATEWAY_JWT_SECRET") or dev_secret(data_dir)
    except SystemExit as exc:  # dev_secret says where the key should be
        st.err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None
    role_list = [r.strip() for r in roles.split(",") if r.strip()]
    sys.stdout.write(mint(secret, user.strip(), department.strip(), role_list, ttl) + "\n")


# ---------- connectors (admin): connectors.py, which uses the helpers above ----------
from ragmesh_cli.connectors import connectors_app  # noqa: E402

app.add_typer(connectors_app, name="connectors")


def run() -> None:
    """The `ragmesh` launcher: the app, then Ctrl-C blocked until the process is gone. Once the command is done, a
    Ctrl-C changes nothing: without this, one that arrived while Python tears the process down (tens of ms after
    a bulk `ragmesh ingest`, once the interpreter has reset its handlers) killed it by the signal (exit status
    -2 / 130 from the shell) instead of the command's own exit code; blocked, it is dropped with the process."""
    try:
        app(prog_name="ragmesh")
    except KeyboardInterrupt:  # one that arrived after click's own handling, as the command returned
        raise SystemExit(130) from None
    finally:
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

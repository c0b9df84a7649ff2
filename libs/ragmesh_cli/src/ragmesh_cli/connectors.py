"""`ragmesh connectors list | add | run | runs | rm` (admin role): folders and web sites synced into documents
(the gateway's /api/v1/admin/connectors). A connector is named by its name or its id."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragmesh_cli.client import Api, ApiError
from ragmesh_cli.ingest import parse_acl
from ragmesh_cli.main import JsonFlag, failing_clearly, print_json, state

connectors_app: typer.Typer = typer.Typer(
    no_args_is_help=True, help="Folders and web sites synced into documents (admin): list, add, run, runs, rm."
)
PATH = "/api/v1/admin/connectors"
RUN_DONE = ("succeeded", "partial", "failed", "interrupted", "skipped")
COUNTS = ("new", "changed", "unchanged", "deleted", "acl_changed", "skipped", "failed")


def resolve(api: Api, name_or_id: str) -> dict[str, Any]:
    """The connector named `name_or_id` (its name or its id)."""
    for connector in api.get(PATH)["connectors"]:
        if name_or_id in (connector["name"], connector["connector_id"]):
            return connector  # type: ignore[no-any-return]
    raise ApiError(404, f"no connector named {name_or_id!r}")


def counts_text(counts: dict[str, Any]) -> str:
    return ", ".join(f"{counts[k]} {k.replace('_', ' ')}" for k in COUNTS if counts.get(k))


def connectors_table(console: Console, connectors: list[dict[str, Any]]) -> None:
    table = Table(title=f"{len(connectors)} connectors", title_justify="left")
    for column in ("name", "kind", "source", "every", "documents", "last run", "id"):
        table.add_column(column, overflow="fold")
    for c in connectors:
        config = c.get("config") or {}
        source = config.get("root") or ", ".join(config.get("seeds") or config.get("sitemaps") or [])
        last = c.get("last_run") or {}
        table.add_row(
            escape(c["name"]),
            c["kind"],
            escape(str(source)),
            f"{c['schedule_seconds']}s" if c.get("schedule_seconds") else "manual",
            str(c.get("documents", 0)),
            escape(f"{last.get('status', '')} {counts_text(last.get('counts') or {})}".strip()) or "never",
            c["connector_id"],
        )
    console.print(table)


def runs_table(console: Console, runs: list[dict[str, Any]]) -> None:
    table = Table(title=f"{len(runs)} runs", title_justify="left")
    for column in ("queued", "trigger", "status", "counts", "message", "run"):
        table.add_column(column, overflow="fold")
    for r in runs:
        table.add_row(
            str(r.get("queued_at", "")),
            r["trigger"],
            r["status"],
            escape(counts_text(r.get("counts") or {})),
            escape(r.get("message") or ""),
            r["run_id"],
        )
    console.print(table)


@connectors_app.command("list")
def list_connectors(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """The connectors, with their last run."""
    st = state(ctx)
    with failing_clearly(st), Api(st.settings) as api:
        body = api.get(PATH)
    if as_json:
        print_json(st, body)
    else:
        connectors_table(st.out, body["connectors"])


@connectors_app.command("add")
def add(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(help="Lower case letters, digits, _ . - (its documents' owner: connector:NAME)")
    ],
    folder: Annotated[str | None, typer.Option(help="A folder to sync (inside CONNECTORS_ALLOWED_ROOTS)")] = None,
    url: Annotated[list[str] | None, typer.Option(help="A web seed URL (repeatable)")] = None,
    sitemap: Annotated[list[str] | None, typer.Option(help="A sitemap URL (repeatable)")] = None,
    allow_host: Annotated[
        list[str] | None, typer.Option(help="A host the crawler may fetch from (repeatable; default: the seeds')")
    ] = None,
    depth: Annotated[int, typer.Option(min=0, max=10, help="Links followed from a seed")] = 2,
    max_pages: Annotated[int, typer.Option(min=1, help="Requests per run")] = 200,
    every: Annotated[int, typer.Option(min=0, help="Run every this many seconds (>= 60); 0: manual only")] = 0,
    acl: Annotated[
        list[str] | None, typer.Option(help="Default ACL: JSON or departments=eng;users=bob (folders: mapping files)")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a folder connector (--folder) or a web connector (--url / --sitemap)."""
    st = state(ctx)
    with failing_clearly(st):
        if bool(folder) == bool(url or sitemap):
            raise ValueError("give either --folder, or --url/--sitemap")
        body: dict[str, Any] = {"name": name, "schedule_seconds": every, "acl": parse_acl(acl or []) or {}}
        if folder:
            body |= {"kind": "folder", "config": {"root": folder}}
        else:
            from urllib.parse import urlsplit

            hosts = allow_host or sorted({urlsplit(u).netloc for u in [*(url or []), *(sitemap or [])]})
            body |= {
                "kind": "web",
                "config": {
                    "seeds": url or [],
                    "sitemaps": sitemap or [],
                    "allowed_hosts": hosts,
                    "max_depth": depth,
                    "max_pages": max_pages,
                },
            }
        with Api(st.settings) as api:
            created = api.post(PATH, body)
    if as_json:
        print_json(st, created)
    else:
        connectors_table(st.out, [created])


@connectors_app.command("run")
def run(
    ctx: typer.Context,
    connector: Annotated[str, typer.Argument(help="Name or id")],
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the run to finish and print its report")] = False,
    wait_timeout: Annotated[float, typer.Option(min=1, help="Seconds to wait with --wait")] = 3600,
    as_json: JsonFlag = False,
) -> None:
    """Run a connector now."""
    st = state(ctx)
    with failing_clearly(st), Api(st.settings) as api:
        found = resolve(api, connector)
        report = api.post(f"{PATH}/{found['connector_id']}/runs", {})
        deadline = time.monotonic() + wait_timeout
        while wait and report["status"] not in RUN_DONE:
            if time.monotonic() > deadline:
                raise ApiError(None, f"run {report['run_id']} did not finish within {wait_timeout:g}s")
            time.sleep(1)
            report = api.get(f"{PATH}/{found['connector_id']}/runs/{report['run_id']}")
    if as_json:
        print_json(st, report)
    else:
        runs_table(st.out, [report])
        for problem in report.get("problems") or []:
            st.out.print(escape(f"  {problem.get('key') or '-'}: {problem.get('reason', '')}"))
    if wait and report["status"] in ("failed", "partial"):
        raise typer.Exit(1)


@connectors_app.command("runs")
def runs(
    ctx: typer.Context,
    connector: Annotated[str, typer.Argument(help="Name or id")],
    limit: Annotated[int, typer.Option(min=1, max=200)] = 20,
    as_json: JsonFlag = False,
) -> None:
    """A connector's runs, newest first, with their reports."""
    st = state(ctx)
    with failing_clearly(st), Api(st.settings) as api:
        found = resolve(api, connector)
        body = api.get(f"{PATH}/{found['connector_id']}/runs", {"limit": limit})
    if as_json:
        print_json(st, body)
    else:
        runs_table(st.out, body["runs"])


@connectors_app.command("rm")
def remove(
    ctx: typer.Context, connector: Annotated[str, typer.Argument(help="Name or id")], as_json: JsonFlag = False
) -> None:
    """Delete a connector and every document it made (a run does it)."""
    st = state(ctx)
    with failing_clearly(st), Api(st.settings) as api:
        found = resolve(api, connector)
        body = api.delete(f"{PATH}/{found['connector_id']}")
    if as_json:
        print_json(st, body)
    else:
        st.out.print(f"deleting {escape(found['name'])}: its documents go with it (run {body['run']['run_id']})")

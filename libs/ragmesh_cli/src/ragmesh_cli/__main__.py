"""`python -m ragmesh_cli` runs the `ragmesh` command."""

from ragmesh_cli.main import run

run()

"""A parser worker process: `python -m ragmesh_parser.worker FD`, started by isolation.ParsePool with one end of
a socket pair as FD."""

import sys

from ragmesh_parser.isolation import serve

if __name__ == "__main__":
    serve(int(sys.argv[1]))

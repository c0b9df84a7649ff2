"""Generates the Python stubs (+ typed .pyi from mypy-protobuf) for every proto under proto/ into one place.

Usage: python tools/gen_proto.py [OUT_DIR]   (default: libs/ragmesh_common/src)
The drift test runs this into a temporary folder and compares with the committed files.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

try:
    from importlib.resources import files
except ImportError:  # pragma: no cover
    raise

ROOT = Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto"
DEFAULT_OUT = ROOT / "libs" / "ragmesh_common" / "src"


def generate(out: Path) -> list[Path]:
    protos = sorted(PROTO.rglob("*.proto"))
    include = str(files("grpc_tools") / "_proto")
    # mypy-protobuf's plugins (beside this interpreter): enum ValueTypes, typed HasField and typed stubs/servicers
    # for the *_pb2_grpc modules, which protoc's own --pyi_out leaves untyped
    plugins = Path(sys.executable).parent
    args = [
        "protoc",
        f"-I{PROTO}",
        f"-I{include}",
        f"--plugin=protoc-gen-mypy={plugins / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={plugins / 'protoc-gen-mypy_grpc'}",
        f"--python_out={out}",
        f"--mypy_out=quiet:{out}",
        f"--grpc_python_out={out}",
        f"--mypy_grpc_out=quiet:{out}",
        *[str(p.relative_to(PROTO)) for p in protos],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    package_dirs = {p.parent for p in out.joinpath("ragmesh").rglob("*_pb2.py")}
    for d in sorted(package_dirs):
        while d != out:
            init = d / "__init__.py"
            if not init.exists():
                init.write_text('"""Generated from proto/ by tools/gen_proto.py. Do not edit."""\n')
            d = d.parent
    return sorted(out.joinpath("ragmesh").rglob("*.py*"))


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    written = generate(target)
    print(f"generated {len(written)} files under {target / 'ragmesh'}")

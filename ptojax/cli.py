"""The ``ptojax`` command line."""
from __future__ import annotations

import argparse
import sys


def _ops(args) -> int:
    from .primitives import OPS

    width = max(len(name) for name in OPS)
    print(f"{'op':<{width}}  {'family':<11}  {'grad':<4}  dtypes")
    for op in sorted(OPS.values(), key=lambda o: (o.family, o.name)):
        if args.family and op.family != args.family:
            continue
        dtypes = ", ".join(d.name for d in op.dtypes)
        print(f"{op.name:<{width}}  {op.family:<11}  {'yes' if op.differentiable else 'no':<4}  {dtypes}")
    return 0


def main(argv=None) -> int:
    from . import __version__

    parser = argparse.ArgumentParser(prog="ptojax", description="PyPTO's programming model for JAX.")
    parser.add_argument("--version", action="version", version=f"ptojax {__version__}")
    commands = parser.add_subparsers(dest="command")
    ops = commands.add_parser("ops", help="list the op catalogue (pj.ops) with families and dtypes")
    ops.add_argument("--family", help="only this family (elementwise, reduce, matmul, layout, indexing, composite)")
    ops.set_defaults(run=_ops)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

"""The ``mind`` command: one subcommand per module in ``mind.cli``, each with ``register`` and ``run``.

Exit status: 0 success, 1 diagnostics about the program, 2 usage errors or unreadable input, 3 an
internal error; which code gives which is the table of ``mind.cli.exit_status``.  Every failure is a
coded diagnostic; a Python traceback from this command is a bug.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from typing import Any, Sequence

from mind.cli.exit_status import USAGE
from mind.diagnostics import MindError, error

# Subcommand modules, in help order.  Each defines NAME, HELP, register(parser) and run(args) -> int.
COMMANDS = ("cmd_run", "cmd_build", "cmd_check", "cmd_ir", "cmd_grad", "cmd_verify", "cmd_audit", "cmd_spec", "cmd_conformance",
            "cmd_export")


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    """argparse, but usage errors become E7002 diagnostics instead of a bare exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> Parser:
    from mind.cli.exit_status import MEANING

    parser = Parser(prog="mind", description="MIND: a formally specified tensor language.",
                    epilog="exit status: " + ", ".join(f"{s} {m}" for s, m in MEANING.items())
                           + " (each diagnostic code's: docs/errors.md)")
    from mind.version import __version__

    parser.add_argument("--version", action="version", version=f"mind {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"mind.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"mind.cli.{name}":
                continue  # a subcommand not built yet
            raise
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.register(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    from mind.cli.output import forget_warnings

    forget_warnings()
    from mind.cache_store import MindCacheWarning

    with warnings.catch_warnings():  # restores Python's warning machinery when the command ends
        warnings.simplefilter("always", MindCacheWarning)  # reported, never raised (``-W error``)
        warnings.showwarning = _warning_printer(as_json, warnings.showwarning)
        return _run(argv, as_json)


def _warning_printer(as_json: bool, default: Any) -> Any:
    """A ``warnings.showwarning`` that reports MIND's coded warnings as diagnostics (once each;
    in ``--json``'s output), and shows any other warning as Python would."""
    from mind.cache_store import MindCacheWarning
    from mind.cli.output import report_warning

    def show(message: Any, category: type, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if isinstance(message, MindCacheWarning):
            report_warning(message.diagnostic, as_json)
        else:
            default(message, category, filename, lineno, file, line)
    return show


def _run(argv: list[str], as_json: bool) -> int:
    from mind.cli.output import report_error

    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except UsageError as exc:
            raise error("E7002", str(exc), help="run `mind --help` or `mind COMMAND --help`") from None
        if not getattr(args, "_run", None):
            parser.print_help(sys.stderr)
            return USAGE
        return int(args._run(args))
    except MindError as exc:
        return report_error(exc, as_json)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug in MIND: still a coded diagnostic, never a traceback
        import traceback

        frames = traceback.extract_tb(exc.__traceback__)
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
        err = error("E7009", f"internal compiler error: {type(exc).__name__}: {exc}",
                    help="this is a bug in MIND; please report it with the input that caused it",
                    notes=(f"raised at {where}",))
        return report_error(err, as_json)


if __name__ == "__main__":
    sys.exit(main())

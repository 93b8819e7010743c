"""The one error path of the ``devkit`` command.

Every handler may raise; :func:`report` (called by :func:`devkit.cli.main`) turns what it raised into
what the user sees and the exit status:

- a mistake in what the user typed (:class:`UsageError`, or one of the kit's input-error types listed in
  :func:`input_error_types`): one line ``devkit CMD: error: ...`` naming the argument, the value and what
  was expected; exit 2;
- a fault the simulator found in a kernel (:class:`devkit.KernelError`): one line with the kernel's
  ``file:line``; exit 1;
- an exception raised by the user's own code (:class:`UserCodeError`, or any exception whose traceback
  passes through a file outside the kit): the traceback restricted to the user's frames; exit 1;
- Ctrl-C (``KeyboardInterrupt``): one line; exit 130;
- anything else is a bug in the kit: the full traceback, said to be one; exit 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import sysconfig
import traceback
from pathlib import Path
from typing import Any, TextIO

#: Exit statuses.
EXIT_FAULT = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

_KIT_DIR = str(Path(__file__).resolve().parents[1])  # .../devkit
_LIBRARY_DIRS = tuple(
    {
        str(Path(p).resolve())
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (p := sysconfig.get_path(key))
    }
)


class UsageError(Exception):
    """A mistake on the command line, reported as one line (exit status 2).

    Build it with :func:`bad_value` when one argument's value is at fault, so the message names the
    argument, the value and what was expected.
    """


def bad_value(argument: str, value: Any, expected: str) -> UsageError:
    """``--grid 'abc': expected ...`` as a :class:`UsageError`."""
    shown = value if isinstance(value, str) else str(value)
    return UsageError(f"{argument} {shown!r}: expected {expected}")


def unknown_choice(argument: str, value: str, kind: str, choices: Any) -> UsageError:
    """``--target 'tpu': unknown target; choose one of inf2, trn1, trn2`` as a :class:`UsageError`."""
    return UsageError(f"{argument} {value!r}: unknown {kind}; choose one of {', '.join(choices)}")


def missing_subcommand(parser: argparse.ArgumentParser) -> int:
    """A command group called without its subcommand: one line naming the choices (``--help`` shows the
    full text).  Use as the group's default ``func``: ``p.set_defaults(func=lambda a: missing_subcommand(p))``."""
    names = [
        name
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name in action.choices
    ]
    raise UsageError(f"name a subcommand: {', '.join(names)} (see {parser.prog} --help)")


class UserCodeError(Exception):
    """An exception raised by the user's own code (``what`` says when, e.g. ``importing k.py``).

    :func:`report` prints the traceback of ``__cause__`` restricted to the user's frames.
    """

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def input_error_types() -> tuple[type[BaseException], ...]:
    """The kit's exception types whose message already names a bad input (reported as usage errors)."""
    from devkit.cost.calibrate import MeasurementError
    from devkit.cost.params import ParamsError
    from devkit.declare import SpecError
    from devkit.project import ProjectError
    from devkit.workflow.executor import ExecutorError
    from devkit.workflow.hw.predict import CalibrationInputError
    from devkit.workflow.hw.store import StoreError
    from devkit.workflow.kernel_ref import KernelRefError
    from devkit.workflow.llm import ModelConfigError
    from devkit.workflow.promote import PromoteError
    from devkit.workflow.svd.factor import SvdInputError
    from devkit.workflow.sweep import SweepError
    from devkit.workflow.tune import TuneError
    from devkit.workflow.validate import ValidateError

    types: list[type[BaseException]] = [
        UsageError,
        KernelRefError,
        TuneError,
        PromoteError,
        SvdInputError,
        CalibrationInputError,
        StoreError,
        ParamsError,
        MeasurementError,
        ModelConfigError,
        SpecError,
        ProjectError,
        SweepError,
        ValidateError,
        ExecutorError,
    ]
    # the kit's kernels reject shapes and blocks they cannot run with BlockError; the target loader
    # rejects unknown targets with TargetError
    from devkit.kernels.plans import BlockError
    from devkit.targets import TargetError

    types += [BlockError, TargetError]
    return tuple(types)


def is_kit_file(filename: str) -> bool:
    """Whether a traceback frame's file belongs to the kit, Python itself or an installed library."""
    if filename.startswith("<"):  # <frozen runpy>, <string>
        return True
    path = os.path.realpath(filename)
    if path.startswith(_KIT_DIR + os.sep):
        return True
    return any(path.startswith(d + os.sep) for d in _LIBRARY_DIRS)


def user_frames(tb: Any) -> list[traceback.FrameSummary]:
    """The frames of traceback ``tb`` that are the user's (outside the kit, Python and libraries)."""
    return [f for f in traceback.extract_tb(tb) if not is_kit_file(f.filename)]


def print_user_traceback(exc: BaseException, stream: TextIO) -> None:
    """``Traceback ...`` with only the user's frames, then the exception line (as Python prints it)."""
    frames = user_frames(exc.__traceback__)
    if frames:
        stream.write("Traceback (most recent call last):\n")
        stream.write("".join(traceback.format_list(frames)))
    stream.write("".join(traceback.format_exception_only(type(exc), exc)))


def one_line(text: str) -> str:
    """Messages of the kit's input errors are one line; keep any stray newlines from breaking that."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def report(exc: BaseException, prog: str, stream: TextIO | None = None) -> int:
    """Print ``exc`` for the user as described in the module docstring; return the exit status."""
    from devkit.errors import KernelError

    out = stream or sys.stderr
    if isinstance(exc, KeyboardInterrupt):
        out.write(f"{prog}: interrupted\n")
        return EXIT_INTERRUPTED
    if isinstance(exc, input_error_types()):
        out.write(f"{prog}: error: {one_line(str(exc))}\n")
        return EXIT_USAGE
    if isinstance(exc, KernelError):
        out.write(f"{prog}: kernel fault: {one_line(str(exc))}\n")
        return EXIT_FAULT
    if isinstance(exc, UserCodeError):
        cause = exc.__cause__ or exc
        if user_frames(cause.__traceback__) or isinstance(cause, SyntaxError):
            out.write(f"{prog}: error {exc.what}: your code raised {type(cause).__name__}\n")
            print_user_traceback(cause, out)
            return EXIT_FAULT
        exc = cause  # nothing of the user's on the stack: the kit failed while running user code
    if isinstance(exc, OSError) and exc.filename is not None:
        # a file the user named (or a location derived from one) cannot be read or written
        reason = exc.strerror or type(exc).__name__
        out.write(f"{prog}: error: {exc.filename}: {reason}\n")
        return EXIT_USAGE
    if user_frames(exc.__traceback__):
        out.write(f"{prog}: your code raised {type(exc).__name__}\n")
        print_user_traceback(exc, out)
        return EXIT_FAULT
    out.write(f"{prog}: internal error (a bug in devkit; please report it with the traceback below)\n")
    out.write("".join(traceback.format_exception(exc)))
    return EXIT_FAULT

"""Start-up failures an operator can fix (a taken port, a missing file, a locked or read-only store).

They end ``twistd`` with one line on stderr and exit status 1 instead of a Python traceback. Any other
error that escapes start-up is said in one line too, naming its type; ``RMQTX_TRACEBACK=1`` brings
the traceback back for a developer.
"""

from __future__ import annotations

import os
import sys
from types import TracebackType

from twisted.internet.error import CannotListenError
from twisted.logger import Logger

log = Logger(namespace="rmqtx")


class StartupError(Exception):
    """Why the server cannot start, in one line the operator can act on."""


def listen_failure(what: str, error: CannotListenError) -> StartupError:
    """A port that cannot be bound, said plainly."""
    reason = getattr(error.socketError, "strerror", None) or str(error.socketError)
    return StartupError(f"{what} cannot listen on {error.interface or '0.0.0.0'}:{error.port}: {reason}")


def os_failure(what: str, error: OSError) -> StartupError:
    """A file or directory that cannot be read or written, with its path."""
    where = f" ({error.filename})" if error.filename else ""
    return StartupError(f"{what}: {error.strerror or error}{where}")


def missing_extra(feature: str, extra: str, error: ImportError) -> StartupError:
    """A setting that needs an optional dependency the install lacks, with the command that adds it."""
    return StartupError(f"{feature} needs the {extra!r} extra: pip install 'rmqtx[{extra}]' ({error})")


def one_line(kind: type[BaseException], value: BaseException) -> StartupError:
    """Any error that ended start-up, as a StartupError; one not foreseen names its type."""
    if isinstance(value, StartupError):
        return value
    if isinstance(value, ModuleNotFoundError):
        return StartupError(f"a module is missing: {value} (is rmqtx installed with its extras?)")
    if isinstance(value, OSError):
        return os_failure(kind.__name__, value)
    text = str(value).strip().splitlines()
    return StartupError(f"{kind.__name__}: {text[0] if text else 'no message'} (RMQTX_TRACEBACK=1 shows where)")


def install_hook() -> None:
    """Print the error that ends twistd's start-up as one line on the real stderr (see the module's note).

    twistd removes its pid file on the way out and Python exits with status 1, as for any uncaught error.
    """
    if getattr(sys.excepthook, "rmqtx", False):
        return
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if isinstance(value, (KeyboardInterrupt, SystemExit)) or os.environ.get("RMQTX_TRACEBACK") == "1":
            previous(kind, value, tb)
            return
        value = one_line(kind, value)
        stream = sys.__stderr__ or sys.stderr
        if sys.stderr is not stream:  # twistd's log has taken stderr over: put the line in the log too
            log.critical("cannot start: {reason}", reason=str(value))
        stream.write(f"rmqtx: cannot start: {value}\n")
        stream.flush()

    hook.rmqtx = True  # type: ignore[attr-defined]
    sys.excepthook = hook


def fail_after_start(reason: str, reactor: object) -> None:
    """A part that fails once the reactor runs (a child broker group that could not start) ends the
    process as a start-up failure does: the line in the log and on the real stderr, then, once every
    service has stopped, exit status 1 (twistd itself would exit 0 after a reactor stop)."""
    import atexit

    log.critical("cannot start: {reason}", reason=reason)

    def exit_1() -> None:
        stream = sys.__stderr__ or sys.stderr
        stream.write(f"rmqtx: cannot start: {reason}\n")
        stream.flush()
        if sys.stdout is not None:
            sys.stdout.flush()
        os._exit(1)

    atexit.register(exit_1)
    from twisted.internet.error import ReactorNotRunning

    try:
        reactor.stop()  # type: ignore[attr-defined]
    except ReactorNotRunning:  # already stopping
        pass

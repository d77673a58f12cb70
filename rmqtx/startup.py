"""Start-up failures an operator can fix (a taken port, a missing file, a locked or read-only store).

They end ``twistd`` with one line on stderr and exit status 1 instead of a Python traceback.
"""

from __future__ import annotations

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


def install_hook() -> None:
    """Print a StartupError that ends twistd as one line on the real stderr; other errors keep their traceback.

    twistd removes its pid file on the way out and Python exits with status 1, as for any uncaught error.
    """
    if getattr(sys.excepthook, "rmqtx", False):
        return
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if not isinstance(value, StartupError):
            previous(kind, value, tb)
            return
        stream = sys.__stderr__ or sys.stderr
        if sys.stderr is not stream:  # twistd's log has taken stderr over: put the line in the log too
            log.critical("cannot start: {reason}", reason=str(value))
        stream.write(f"rmqtx: cannot start: {value}\n")
        stream.flush()

    hook.rmqtx = True  # type: ignore[attr-defined]
    sys.excepthook = hook

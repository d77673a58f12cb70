"""Send the store's stdlib ``logging`` records (INFO and up) to Twisted's log, where twistd writes everything else."""

from __future__ import annotations

import logging

from twisted.logger import Logger, LogLevel

_LEVELS = ((logging.CRITICAL, LogLevel.critical), (logging.ERROR, LogLevel.error),
           (logging.WARNING, LogLevel.warn), (logging.INFO, LogLevel.info))


class TwistedHandler(logging.Handler):
    """One Twisted log event per record, in the record's logger namespace."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = next((tw for std, tw in _LEVELS if record.levelno >= std), LogLevel.debug)
            Logger(namespace=record.name).emit(level, "{message}", message=self.format(record))
        except Exception:
            self.handleError(record)


def bridge(name: str = "rmqtx") -> None:
    """Route ``name``'s records to Twisted's log at INFO and up (once per process)."""
    logger = logging.getLogger(name)
    if any(isinstance(h, TwistedHandler) for h in logger.handlers):
        return
    logger.addHandler(TwistedHandler())
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    logger.propagate = False

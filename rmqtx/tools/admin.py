"""``rmqadmin``: Apache mqadmin's everyday subcommands for any RocketMQ-compatible cluster."""

from __future__ import annotations

import sys

from twisted.internet import defer, task

from rmqtx.tools.cli import run


def main(argv: list[str] | None = None) -> None:
    """Console entry: run one subcommand on a fresh reactor and exit with its code."""
    args = list(sys.argv[1:] if argv is None else argv)

    def go(reactor: object) -> defer.Deferred:
        return defer.ensureDeferred(_run_and_exit(args))

    task.react(go)


async def _run_and_exit(args: list[str]) -> None:
    code = await run(args, sys.stdout, sys.stderr)
    if code:
        raise SystemExit(code)


if __name__ == "__main__":
    main()

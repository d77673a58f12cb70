"""python -m rmqtx.store dump STORE_DIR [--topic T] | verify STORE_DIR"""
from __future__ import annotations

import argparse
import sys

import orjson

from rmqtx.common.progress import Progress

from .tools import dump, verify, verify_summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rmqtx.store", description="Inspect a RocketMQ 4.x store directory.")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="one JSON line per message")
    d.add_argument("store_dir")
    d.add_argument("--topic")
    v = sub.add_parser("verify", help="check records, consume queues and index; JSON report on stdout, "
                                      "progress and a summary line on stderr; exit 1 on errors")
    v.add_argument("store_dir")
    v.add_argument("--hash-slots", type=int, help="maxHashSlotNum (default: from the index file size)")
    args = p.parse_args(argv)
    if args.cmd == "dump":
        try:
            dump(args.store_dir, args.topic)
        except BrokenPipeError:  # e.g. piped into head
            sys.stderr.close()
        return 0
    progress = Progress("verify")  # progress and the summary line on stderr; the JSON report alone on stdout
    summary = verify(args.store_dir, args.hash_slots, progress=progress)
    sys.stdout.buffer.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()
    progress.done(verify_summary(summary))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

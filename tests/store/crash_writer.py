"""Child process for crash tests: put messages forever, printing each acknowledgement.

Arguments: store root, flush type, and optionally which group commit thread SYNC_FLUSH uses
(``c`` for rmqtx._accel.Committer, ``py`` for PyCommitter; else the store's default)."""
from __future__ import annotations

import sys

from twisted.internet import reactor

from rmqtx.store import MessageStore, MessageToStore, StoreConfig

root, flush_type = sys.argv[1], sys.argv[2]
twin = sys.argv[3] if len(sys.argv) > 3 else ""
cfg = StoreConfig(store_path_root_dir=root, flush_disk_type=flush_type, mapped_file_size_commit_log=128 * 1024,
                  mapped_file_size_consume_queue=400, max_hash_slot_num=64, max_index_num=256,
                  flush_interval_commit_log=20, flush_interval_consume_queue=30)
store = MessageStore(cfg)
store.load()
if twin == "c":
    from rmqtx import _accel
    store.flush.committer_type = _accel.Committer
elif twin == "py":
    from rmqtx.store.committer import PyCommitter
    store.flush.committer_type = PyCommitter
store.start(reactor)
seq = 0


def ack(res, n: int) -> None:
    sys.stdout.write(f"{n} {res.status.name} {n % 2} {res.queue_offset} {res.wrote_offset}\n")
    sys.stdout.flush()
    reactor.callLater(0, send)


def send() -> None:
    global seq
    n = seq
    seq += 1
    body = (f"crash-{n:06d}-".encode() + bytes([97 + n % 26]) * (200 + n % 900))
    m = MessageToStore(topic="K", queue_id=n % 2, flag=0, body=body,
                       properties=f"KEYS\x01key-{n}\x02UNIQ_KEY\x01U{n:08d}\x02TAGS\x01T{n % 2}", sys_flag=0,
                       born_timestamp=1, born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 10911))
    store.put_message(m).addCallback(ack, n)


for _ in range(16):
    reactor.callWhenRunning(send)
print("ready", flush=True)
reactor.run()

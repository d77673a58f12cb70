"""Child process: fill an index file past half (so the spare is made), leave one entry ahead of the header, die."""
from __future__ import annotations

import os
import signal
import sys

from rmqtx.store import MessageStore, MessageToStore, StoreConfig
from rmqtx.store.record import index_key_hash

root = sys.argv[1]
store = MessageStore(StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=128 * 1024,
                                 mapped_file_size_consume_queue=400, max_hash_slot_num=64, max_index_num=256))
store.load()
out: list = []
n = 0
while store.index._spare is None or len(store.index.files) < 2:
    m = MessageToStore(topic="S", queue_id=0, flag=0, body=b"spare-%d" % n, properties=f"KEYS\x01k{n}\x02UNIQ_KEY\x01U{n:08d}",
                       sys_flag=0, born_timestamp=1, born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 10911))
    store.put_message(m).addCallback(out.append)
    n += 1
store.index._spare.result()  # the spare is on disk, empty, named after the file in use
current = store.index.files[-1]
# the kill lands inside the next record's indexing: entry and slot written, header not yet
current.put_key(index_key_hash("S#torn"), store.max_phy_offset, current.end_ts)
print(n, os.path.basename(current.mf.path), flush=True)
os.kill(os.getpid(), signal.SIGKILL)

"""rmqtx.store: a RocketMQ 4.x compatible message store (commit log, consume queues, index)."""
from .config import StoreConfig
from .message_store import MessageStore, StoreLockedError
from .mapped_file import StoreError
from .message_filter import MessageFilter
from .results import BatchToStore, GetResult, GetStatus, MessageToStore, PutResult, PutStatus

__all__ = ["StoreConfig", "MessageStore", "StoreError", "StoreLockedError", "MessageToStore",
           "BatchToStore", "PutStatus", "PutResult", "GetStatus", "GetResult", "MessageFilter"]

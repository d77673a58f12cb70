"""The broker-id files Apache's 5.x broker keeps beside its store: ``brokerIdentity`` and ``brokerIdentity-temp``.

Both are one line of ``#``-joined fields: ``cluster#brokerName#brokerId`` for the applied id, and
``cluster#brokerName#brokerId#registerCheckCode`` for an id asked for but not yet confirmed. Apache writes
them with MixAll.string2File (a ``.tmp`` renamed over the file, the old one kept as ``.bak``); so do we,
so a broker directory moves between Apache and rmqtx unchanged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from rmqtx.common.files import write_like_string2file


@dataclass
class BrokerIdentityFile:
    """One of the two files; ``check_code`` is None for the applied one."""

    path: str
    temp: bool = False
    cluster: Optional[str] = None
    name: Optional[str] = None
    broker_id: Optional[int] = None
    check_code: Optional[str] = None

    @property
    def loaded(self) -> bool:
        if not self.cluster or not self.name or self.broker_id is None:
            return False
        return bool(self.check_code) if self.temp else True

    def encode(self) -> str:
        fields = [str(self.cluster), str(self.name), str(self.broker_id)]
        if self.temp:
            fields.append(str(self.check_code))
        return "#".join(fields)

    def decode(self, text: str) -> None:
        parts = text.split("#")
        self.cluster, self.name, self.broker_id = parts[0], parts[1], int(parts[2])
        if self.temp:
            self.check_code = parts[3] if len(parts) > 3 else None

    def read(self) -> None:
        """Load the file if there is one (Java's file2String falls back to nothing, not to ``.bak``)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return
        if text:
            self.decode(text)

    def save(self, cluster: str, name: str, broker_id: int, check_code: Optional[str] = None) -> None:
        """Blocking: the caller runs it in a thread."""
        self.cluster, self.name, self.broker_id, self.check_code = cluster, name, broker_id, check_code
        write_like_string2file(self.path, self.encode())

    def clear(self) -> None:
        """Blocking: forget the fields and delete the file."""
        self.cluster = self.name = self.check_code = None
        self.broker_id = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def identity_files(store_root: str, override: Optional[str] = None) -> tuple[BrokerIdentityFile, BrokerIdentityFile]:
    """(applied, temp) at ``storePathBrokerIdentity`` (default ``<storePathRootDir>/brokerIdentity``) and its ``-temp``."""
    path = override or os.path.join(store_root, "brokerIdentity")
    return BrokerIdentityFile(path), BrokerIdentityFile(path + "-temp", temp=True)

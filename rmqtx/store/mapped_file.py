"""Fixed-size memory-mapped files named by their 20-digit start offset, and their queue."""
from __future__ import annotations

import errno
import logging
import mmap
import os
import re
import threading
from concurrent.futures import Executor, Future
from typing import Callable

log = logging.getLogger(__name__)

_NAME = re.compile(r"^\d{20}$")
TMP_SUFFIX = ".creating"


def remove_leftovers(directory: str) -> None:
    """Delete files a crash left half-created."""
    if os.path.isdir(directory):
        for name in os.listdir(directory):
            if name.startswith(".") and name.endswith(TMP_SUFFIX):
                os.unlink(os.path.join(directory, name))


class StoreError(Exception):
    """A store directory that cannot be opened as it is."""


def file_name(offset: int) -> str:
    return f"{offset:020d}"


def retire(files: list["MappedFile"], allocator: Executor | None, dirs: tuple[str, ...] = ()) -> None:
    """Close and unlink files already detached from their queue, then remove emptied directories.

    Unlinking a large file can take milliseconds, so with an allocator thread the work goes there.
    That one thread also creates every file, in submission order, so a queue re-created under the
    same names (a topic deleted and written again) never has a new file unlinked by an old job.
    """
    if allocator is None:
        _destroy_all(files, dirs)
    else:
        allocator.submit(_destroy_all, files, dirs)


def _destroy_made(made: Future) -> None:
    try:
        made.result().destroy()
    except OSError:
        pass  # it was never made


def _destroy_all(files: list["MappedFile"], dirs: tuple[str, ...]) -> None:
    for mf in files:
        try:
            mf.destroy()
        except (OSError, BufferError) as e:  # BufferError: a reader still holds a view of the map
            log.error("deleting %s failed: %s", mf.path, e)
    for directory in dirs:
        try:
            os.rmdir(directory)
        except OSError:
            pass  # not empty (re-created meanwhile) or already gone


def _ensure_dir(directory: str) -> None:
    """The file's directory: new for a new queue's first file, or removed (emptied) by retire().
    One ``mkdir`` where ``os.makedirs`` costs a ``stat`` more (two when the directory exists): the
    file thread makes a directory per new queue, 100,000 in a burst of first sends."""
    try:
        os.mkdir(directory)
    except FileExistsError:
        pass
    except FileNotFoundError:  # the topic's directory too
        os.makedirs(directory, exist_ok=True)


def _map(fd: int, size: int, readahead: bool) -> mmap.mmap:
    """Map the file; without ``readahead`` a page fault brings in that page only.

    A consume queue unit's first write into a fresh sparse file faults, and the kernel's readahead
    then zero-fills and charges a whole window of pages (megabytes with large folios) on the
    writing thread, the reactor: per new queue, most of its cost.
    """
    mm = mmap.mmap(fd, size)
    if not readahead:
        mm.madvise(mmap.MADV_RANDOM)
    return mm


def _kept(fd: int, keep: bool) -> int:
    """The descriptor to keep beside a mapping, or -1 (closed now): Python's mmap holds its own
    duplicate, so a kept one is a second descriptor per file (a queue each on a broker of many queues)."""
    if keep:
        return fd
    os.close(fd)
    return -1


def _reserve(fd: int, size: int) -> None:
    """Allocate every block of the file now (ftruncate where the file system cannot)."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        os.ftruncate(fd, size)


class MappedFile:
    """One pre-allocated file mapped read-write; positions are kept by the owner thread."""

    __slots__ = ("path", "file_size", "from_offset", "fd", "mm", "wrote", "_lock", "closed")

    def __init__(self, path: str, file_size: int, from_offset: int, fd: int, mm: mmap.mmap | None) -> None:
        self.path = path
        self.file_size = file_size
        self.from_offset = from_offset
        self.fd = fd
        # None while unmapped, typed as mapped: only consume queues unmap files (a cold queue's,
        # see map and unmap), and they map them again before any use (ConsumeQueue.use)
        self.mm: mmap.mmap = mm  # type: ignore[assignment]
        self.wrote = 0
        self._lock = threading.Lock()
        self.closed = False

    @classmethod
    def create(cls, path: str, file_size: int, from_offset: int = 0, preallocate: bool = False,
               keep_fd: bool = True, readahead: bool = True) -> "MappedFile":
        """Create the file sparse, as Java does; ``preallocate`` (warmMapedFileEnable) reserves its blocks.

        Reserved blocks make a full disk fail here rather than as SIGBUS on a later write through
        the mapping. The file is built under a temporary name and renamed, so a crash never leaves
        a short file. Without ``keep_fd`` the descriptor is closed once mapped (see :meth:`sync`);
        without ``readahead`` see :func:`_map`.
        """
        directory = os.path.dirname(path)
        tmp = os.path.join(directory, f".{os.path.basename(path)}{TMP_SUFFIX}")
        _ensure_dir(directory)
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if preallocate:
                _reserve(fd, file_size)
            else:
                os.ftruncate(fd, file_size)
            mm = _map(fd, file_size, readahead)
            os.rename(tmp, path)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return cls(path, file_size, from_offset, _kept(fd, keep_fd), mm)

    @classmethod
    def open(cls, path: str, file_size: int, from_offset: int = 0, keep_fd: bool = True,
             readahead: bool = True) -> "MappedFile":
        """Map an existing file, which must have exactly the configured size."""
        actual = os.path.getsize(path)
        if actual != file_size:
            raise StoreError(f"{path}: size {actual} differs from the configured {file_size}")
        fd = os.open(path, os.O_RDWR)
        try:
            mm = _map(fd, file_size, readahead)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, file_size, from_offset, _kept(fd, keep_fd), mm)

    @classmethod
    def unmapped(cls, path: str, file_size: int, from_offset: int = 0) -> "MappedFile":
        """An existing file not mapped yet (:meth:`map` maps it); its size is checked then."""
        return cls(path, file_size, from_offset, -1, None)

    def map(self, readahead: bool = True) -> mmap.mmap:
        """Map the file again (after :meth:`unmapped` or :meth:`unmap`); no descriptor is kept."""
        mm = self.mm
        if mm is not None:
            return mm
        fd = os.open(self.path, os.O_RDWR)
        try:
            actual = os.fstat(fd).st_size
            if actual != self.file_size:
                raise StoreError(f"{self.path}: size {actual} differs from the configured {self.file_size}")
            mm = self.mm = _map(fd, self.file_size, readahead)
        finally:
            os.close(fd)
        return mm

    def unmap(self, dispose: Callable[[mmap.mmap], object] | None = None) -> None:
        """Drop the mapping (its dirty pages stay in the page cache; :meth:`sync` opens the file).

        ``dispose`` closes the old mapping instead, elsewhere: a munmap costs the reactor a TLB
        shootdown, thousands of times when a burst of new queues pushes idle ones out.
        """
        mm, self.mm = self.mm, None  # type: ignore[assignment]
        if mm is not None:
            if dispose is None:
                mm.close()
            else:
                dispose(mm)

    def pread(self, pos: int, n: int) -> bytes:
        """Bytes at pos, from the mapping, or read from the file when it is not mapped (no mapping made)."""
        if self.mm is not None:
            return self.mm[pos:pos + n]
        fd = os.open(self.path, os.O_RDONLY)
        try:
            return os.pread(fd, n, pos)
        finally:
            os.close(fd)

    @property
    def end_offset(self) -> int:
        return self.from_offset + self.file_size

    @property
    def is_full(self) -> bool:
        return self.wrote >= self.file_size

    def sync(self) -> None:
        """fdatasync the file (also writes back pages dirtied through the mapping); thread-safe.

        A file mapped without a kept descriptor is opened for the sync: fdatasync on any descriptor
        of the file writes back its pages (mmap.flush() would, but holds the GIL while the disk works).
        """
        with self._lock:
            if self.closed:
                return
            if self.fd >= 0:
                os.fdatasync(self.fd)
                return
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)

    def mtime(self) -> float:
        return os.fstat(self.fd).st_mtime if self.fd >= 0 else os.stat(self.path).st_mtime

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self.mm is not None:
                self.mm.close()
            if self.fd >= 0:
                os.close(self.fd)

    def destroy(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class MappedFileQueue:
    """The files of one directory in offset order; the next file can be made ahead in a thread."""

    # slots: a broker keeps one per consume queue, tens of thousands (docs/many-queues.md)
    __slots__ = ("directory", "file_size", "allocator", "preallocate", "keep_fds", "readahead", "tail_readahead",
                 "files", "_next", "flushed_where")

    def __init__(self, directory: str, file_size: int, allocator: Executor | None = None,
                 preallocate: bool = False, keep_fds: bool = True, readahead: bool = True,
                 tail_readahead: bool = True) -> None:
        self.directory = directory
        self.file_size = file_size
        self.allocator = allocator
        self.preallocate = preallocate
        self.keep_fds = keep_fds  # False: files keep only their mapping (see MappedFile.sync)
        self.readahead = readahead  # False: faults bring in one page (see _map)
        #: False: the file being written (the last) is mapped without readahead whatever ``readahead``
        #: says, and gets ``readahead``'s advice once the next file takes over. For a commit log synced
        #: after every few writes (SYNC_FLUSH): each sync write-protects the file's pages, and the next
        #: write into a page costs a fault whose work grows with the page cache folio holding it.
        #: Readahead is what builds large folios (up to 2 MiB, then also split from a huge mapping);
        #: without it the kernel keeps 4 KiB ones.
        self.tail_readahead = tail_readahead
        self.files: list[MappedFile] = []
        self._next: tuple[int, Future] | None = None
        self.flushed_where = 0

    def load(self, mapped: bool = True) -> None:
        """Every file of the directory, mapped, or with ``mapped`` False only listed (see MappedFile.map)."""
        try:
            listed = os.listdir(self.directory)
        except (FileNotFoundError, NotADirectoryError):
            return
        for name in listed:
            if name.startswith(".") and name.endswith(TMP_SUFFIX):  # half made when a crash came
                os.unlink(os.path.join(self.directory, name))
        names = sorted(n for n in listed if _NAME.match(n))
        for i, name in enumerate(names):
            path = os.path.join(self.directory, name)
            ahead = self.readahead if i < len(names) - 1 else self._tail_advice()
            mf = (MappedFile.open(path, self.file_size, int(name), self.keep_fds, ahead) if mapped
                  else MappedFile.unmapped(path, self.file_size, int(name)))
            mf.wrote = self.file_size
            self.files.append(mf)
        self.flushed_where = self.max_offset

    def _tail_advice(self) -> bool:
        """Readahead for the file being written (see ``tail_readahead``)."""
        return self.readahead and self.tail_readahead

    def _advise(self, mf: MappedFile, readahead: bool) -> None:
        """Give a mapped file the kernel advice for ``readahead`` (a closed or unmapped one is left)."""
        if mf.mm is not None and not mf.closed:
            mf.mm.madvise(mmap.MADV_NORMAL if readahead else mmap.MADV_RANDOM)

    def set_readahead(self, enabled: bool) -> None:
        """Switch the kernel's readahead for every mapped file and the files mapped from now on
        (5.x's SET_COMMITLOG_READ_MODE): madvise only changes the mapping's advice, nothing is read.
        Without ``tail_readahead`` the file being written keeps none."""
        self.readahead = enabled
        files = list(self.files)
        for i, mf in enumerate(files):
            try:
                self._advise(mf, enabled if i < len(files) - 1 else self._tail_advice())
            except ValueError:
                pass  # unmapped meanwhile (expired and deleted)

    @property
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    @property
    def min_offset(self) -> int:
        return self.files[0].from_offset if self.files else -1

    @property
    def max_offset(self) -> int:
        """End of written data (file start + write position of the last file)."""
        last = self.files[-1] if self.files else None
        return last.from_offset + last.wrote if last else 0

    def find(self, offset: int) -> MappedFile | None:
        """The file holding offset, or None."""
        files = self.files
        if not files:
            return None
        i = offset // self.file_size - files[0].from_offset // self.file_size
        if 0 <= i < len(files):
            mf = files[i]
            if mf.from_offset <= offset < mf.end_offset:
                return mf
        for mf in files:
            if mf.from_offset <= offset < mf.end_offset:
                return mf
        return None

    def last_for_write(self, start_offset: int = 0) -> MappedFile:
        """The last file if it has room, else a new one (raises OSError if it cannot be made)."""
        last = self.files[-1] if self.files else None
        if last is not None and last.wrote < self.file_size:
            return last
        offset = last.end_offset if last is not None else start_offset - start_offset % self.file_size
        mf = self._take_prepared(offset)
        if mf is None:
            path = os.path.join(self.directory, file_name(offset))
            if self.allocator is None:
                mf = MappedFile.create(path, self.file_size, offset, self.preallocate, self.keep_fds,
                                       self._tail_advice())
            else:  # queued behind any retire() of this directory: an old file of the same name goes first
                mf = self.allocator.submit(MappedFile.create, path, self.file_size, offset, self.preallocate,
                                           self.keep_fds, self._tail_advice()).result()
        if last is not None and self._tail_advice() != self.readahead:
            self._advise(last, self.readahead)  # written: read as the other files are
        self.files.append(mf)
        return mf

    def prepare_next(self, first_offset: int | None = None) -> None:
        """Start creating the file after the last one (or, with no file yet, the one holding first_offset)."""
        if self.allocator is None or self._next is not None:
            return
        if self.files:
            offset = self.files[-1].end_offset
        elif first_offset is not None:
            offset = first_offset - first_offset % self.file_size
        else:
            return
        path = os.path.join(self.directory, file_name(offset))
        self._next = (offset, self.allocator.submit(MappedFile.create, path, self.file_size, offset, self.preallocate,
                                                    self.keep_fds, self._tail_advice()))

    @property
    def next_pending(self) -> bool:
        return self._next is not None

    def next_future(self) -> Future | None:
        """The pending creation of the next file, if any (a replica waits on it off the reactor)."""
        return self._next[1] if self._next is not None else None

    def _take_prepared(self, offset: int) -> MappedFile | None:
        if self._next is None:
            return None
        want, fut = self._next
        self._next = None
        try:
            mf = fut.result()  # normally done long ago; waits only if a whole file filled first
        except OSError as e:
            log.warning("pre-allocating %s failed: %s", self.directory, e)
            return None
        if want == offset:
            return mf
        retire([mf], self.allocator)
        return None

    def discard_prepared(self) -> None:
        """Drop a pre-made file that was never used (it would look like a torn tail)."""
        if self._next is None:
            return
        _, made = self._next
        self._next = None
        assert self.allocator is not None  # only prepare_next sets _next, and only with an allocator
        self.allocator.submit(_destroy_made, made)  # runs after the making job: one FIFO thread

    def truncate_dirty(self, offset: int) -> None:
        """Forget everything at or after offset: later files go, the holding file is cut."""
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.end_offset <= offset:
                keep.append(mf)
            elif mf.from_offset <= offset:
                pos = offset - mf.from_offset
                mf.wrote = pos
                keep.append(mf)
            else:
                mf.destroy()
        if keep and len(keep) < len(self.files) and self._tail_advice() != self.readahead:
            self._advise(keep[-1], self._tail_advice())  # the cut file is written next
        self.files = keep
        self.flushed_where = min(self.flushed_where, offset)

    def remove_first(self, count: int) -> list[MappedFile]:
        """Detach the oldest files now; they are deleted in the allocator thread."""
        removed, self.files = self.files[:count], self.files[count:]
        retire(removed, self.allocator)
        return removed

    def dirty_files(self) -> list[MappedFile]:
        """Files holding bytes between the flushed position and the write position."""
        out = []
        for mf in reversed(self.files):
            if mf.end_offset <= self.flushed_where:
                break
            out.append(mf)
        return out

    def close(self) -> None:
        self.discard_prepared()
        for mf in self.files:
            mf.close()

    def destroy(self, parents: tuple[str, ...] = ()) -> None:
        """Forget every file; they, this directory and then ``parents`` go in the allocator thread."""
        self.discard_prepared()
        files, self.files = self.files, []
        retire(files, self.allocator, (self.directory, *parents))

"""Vectorised gathers from a byte buffer into numpy and Arrow columns.

Each function works on whole columns (numpy index arrays in, Arrow arrays out), so a batch of
records costs a handful of C loops instead of Python objects per message.
"""
from __future__ import annotations

import socket

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_HEX = np.frombuffer(b"0123456789ABCDEF", np.uint8)
_INLINE = 12  # Arrow binary_view keeps values up to 12 bytes inside the view itself


def gather(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """An (n, width) uint8 matrix of the bytes at each position; bytes past the buffer's end repeat its last.

    Indexes a sliding-window view of buf, so numpy copies whole rows instead of single bytes.
    """
    last = len(buf) - width
    if last < 0:
        return np.take(buf, pos[:, None] + np.arange(width), mode="clip")
    windows = np.lib.stride_tricks.as_strided(buf, (last + 1, width), (1, 1), writeable=False)
    out = windows[np.clip(pos, 0, last)]
    tail = pos > last
    if tail.any():
        out[tail] = np.take(buf, pos[tail, None] + np.arange(width), mode="clip")
    return out


def be_int(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Big-endian signed integers of `width` bytes at each position, as native int64."""
    return gather(buf, pos, width).view(f">i{width}").ravel().astype(np.int64)


def field(head: np.ndarray, at: int, width: int) -> np.ndarray:
    """A big-endian signed integer column cut from a gathered header matrix."""
    return np.ascontiguousarray(head[:, at:at + width]).view(f">i{width}").ravel().astype(np.int64)


def binary_segments(buf: np.ndarray, pos: np.ndarray, length: np.ndarray) -> pa.Array:
    """buf[pos[i]:pos[i] + length[i]] for every i, as an Arrow binary array.

    The segments are described as binary_view entries over one zero-copy window of buf; Arrow's
    cast to binary then copies them out in C++. The window must stay under 2 GiB.
    """
    n = len(pos)
    if n == 0:
        return pa.array([], pa.binary())
    length = length.astype(np.int32)
    lo = int(pos.min())
    hi = int((pos + length).max())
    views = np.zeros((n, 16), np.uint8)
    views[:, :4] = length.astype("<i4").view(np.uint8).reshape(n, 4)
    short = length <= _INLINE
    if short.any():
        s = np.flatnonzero(short)
        inline = gather(buf, pos[s], _INLINE)
        inline[np.arange(_INLINE) >= length[s][:, None]] = 0
        views[s, 4:] = inline
    if not short.all():
        lg = np.flatnonzero(~short)
        views[lg, 4:8] = gather(buf, pos[lg], 4)
        views[lg, 12:] = (pos[lg] - lo).astype("<i4").view(np.uint8).reshape(-1, 4)
    window = pa.py_buffer(buf[lo:max(hi, lo + 1)])
    arr = pa.Array.from_buffers(pa.binary_view(), n, [None, pa.py_buffer(views), window])
    return arr.cast(pa.binary())


def to_text(arr: pa.Array) -> pa.Array:
    """Binary to string; invalid UTF-8 (a damaged record) is decoded with replacement chars."""
    try:
        return arr.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([None if b is None else b.decode("utf-8", "replace") for b in arr.to_pylist()],
                        pa.string())


def hex_strings(raw: np.ndarray) -> pa.Array:
    """Each row of an (n, w) byte matrix as 2w upper-case hex digits."""
    n, w = raw.shape
    out = np.empty((n, w, 2), np.uint8)
    out[..., 0] = _HEX[raw >> 4]
    out[..., 1] = _HEX[raw & 15]
    offsets = np.arange(0, (n + 1) * 2 * w, 2 * w, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)])


def host_strings(buf: np.ndarray, pos: np.ndarray, v6: np.ndarray) -> pa.Array:
    """"ip:port" ("[ip6]:port") of each stored host; only distinct hosts become Python strings."""
    n = len(pos)
    index = np.empty(n, np.int64)
    labels: list[str] = []
    v4 = ~v6
    if v4.any():
        keys, inv = np.unique(gather(buf, pos[v4], 8).view(">u8").ravel(), return_inverse=True)
        labels += [f"{socket.inet_ntoa(int(k >> 32).to_bytes(4, 'big'))}:{int(k) & 0xFFFFFFFF}" for k in keys]
        index[v4] = inv.ravel()
    if v6.any():
        raw = np.ascontiguousarray(gather(buf, pos[v6], 20)).view(np.dtype((np.void, 20))).ravel()
        keys, inv = np.unique(raw, return_inverse=True)
        index[v6] = inv.ravel() + len(labels)
        labels += [f"[{socket.inet_ntop(socket.AF_INET6, bytes(k)[:16])}]:{int.from_bytes(bytes(k)[16:], 'big')}"
                   for k in keys]
    return pa.array(labels, pa.string()).take(pa.array(index))


def scatter(values: pa.Array, rows: np.ndarray, n: int) -> pa.Array:
    """A length-n array with values[i] at rows[i] and nulls elsewhere (last value wins)."""
    idx = np.full(n, -1, np.int64)
    idx[rows] = np.arange(len(rows))
    return values.take(pa.array(idx, mask=idx < 0))


def offsets_from_owners(owner: np.ndarray, n: int) -> pa.Array:
    """List offsets for n rows given the (sorted) owning row of each child value."""
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(owner, minlength=n), out=offsets[1:])
    return pa.array(offsets)


def split_properties(props: pa.Array) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """Names, values and owning rows of every "name\\x01value" item, kept as Java keeps them.

    Java splits on \\x02 then \\x01, drops trailing empty parts and keeps items of exactly two parts.
    """
    items = pc.split_pattern(props, "\x02")
    owner = pc.list_parent_indices(items).to_numpy()
    parts = pc.split_pattern(pc.utf8_rtrim(items.flatten(), characters="\x01"), "\x01")
    ok = pc.equal(pc.list_value_length(parts), 2)
    parts = parts.filter(ok)
    owner = owner[ok.to_numpy(zero_copy_only=False)]
    return pc.list_element(parts, 0), pc.list_element(parts, 1), owner


def split_words(values: pa.Array, rows: np.ndarray, n: int) -> pa.Array:
    """A list<string> column: values[i] (owned by sorted rows[i]) split on spaces, empty words dropped."""
    lists = pc.split_pattern(values, " ")
    words = lists.flatten()
    owner = rows[pc.list_parent_indices(lists).to_numpy()]
    keep = pc.not_equal(words, "")
    return pa.ListArray.from_arrays(offsets_from_owners(owner[keep.to_numpy(zero_copy_only=False)], n),
                                    words.filter(keep))

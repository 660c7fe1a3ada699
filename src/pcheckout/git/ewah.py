"""git's EWAH compressed bitmaps (ewah/ewah_bitmap.c, ewah_io.c), as a split index's
``link`` extension stores its delete and replace bitmaps.

On disk, all big-endian: u32 bit count | u32 word count | that many u64 words | u32 the
position of the last marker word.  The words are runs: a marker word (bit 0 the run's
bit, bits 1..32 the run's length in words, bits 33..63 how many literal words follow)
then its literal words; bit ``k`` of word ``w`` (least significant first) is position
``64 * w + k``.  :func:`encode` builds the words as git's ``ewah_set`` does for
positions set in increasing order, so a bitmap git would write comes out byte for byte.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

__all__ = ["EwahError", "decode", "encode"]

WORD_BITS = 64
RUNNING_BITS = 32
LITERAL_BITS = WORD_BITS - 1 - RUNNING_BITS
LARGEST_RUN = (1 << RUNNING_BITS) - 1
LARGEST_LITERALS = (1 << LITERAL_BITS) - 1
ALL_ONES = (1 << WORD_BITS) - 1
_U32 = struct.Struct(">I")
_HEAD = struct.Struct(">II")


class EwahError(ValueError):
    """Bytes that are no EWAH bitmap (truncated, or a run past the end)."""


def decode(data: bytes, offset: int = 0) -> tuple[list[int], int]:
    """The set positions of the bitmap at ``data[offset:]`` in increasing order, and the
    bytes it takes (git's ewah_read_mmap, then ewah_each_bit)."""
    if len(data) - offset < _HEAD.size:
        raise EwahError("truncated bitmap")
    _bits, nwords = _HEAD.unpack_from(data, offset)
    start = offset + _HEAD.size
    end = start + 8 * nwords
    if end + _U32.size > len(data):
        raise EwahError("truncated bitmap")
    words = struct.unpack_from(f">{nwords}Q", data, start)
    positions: list[int] = []
    word = 0  # the position, in words, of the next word the bitmap describes
    i = 0
    while i < nwords:
        marker = words[i]
        run = (marker >> 1) & LARGEST_RUN
        literals = marker >> (1 + RUNNING_BITS)
        if marker & 1:
            positions.extend(range(word * WORD_BITS, (word + run) * WORD_BITS))
        word += run
        if i + 1 + literals > nwords:
            raise EwahError("a run of literal words past the end")
        for lit in words[i + 1 : i + 1 + literals]:
            base = word * WORD_BITS
            while lit:
                low = lit & -lit
                positions.append(base + low.bit_length() - 1)
                lit ^= low
            word += 1
        i += 1 + literals
    return positions, end + _U32.size - offset


class _Builder:
    """ewah_bitmap.c's buffer, marker word and bit count while bits are set in order."""

    def __init__(self) -> None:
        self.buffer = [0]  # ewah_new: one empty marker word
        self.rlw = 0
        self.bit_size = 0

    def _run(self) -> int:
        return (self.buffer[self.rlw] >> 1) & LARGEST_RUN

    def _literals(self) -> int:
        return self.buffer[self.rlw] >> (1 + RUNNING_BITS)

    def _set_run(self, n: int) -> None:
        w = self.buffer[self.rlw]
        self.buffer[self.rlw] = (w & ~(LARGEST_RUN << 1)) | (n << 1)

    def _set_literals(self, n: int) -> None:
        w = self.buffer[self.rlw]
        self.buffer[self.rlw] = (w & ((1 << (1 + RUNNING_BITS)) - 1)) | (n << (1 + RUNNING_BITS))

    def _push_marker(self) -> None:
        self.buffer.append(0)
        self.rlw = len(self.buffer) - 1

    def _add_empty_words(self, number: int) -> None:
        """add_empty_words(self, 0, number)."""
        if self.buffer[self.rlw] & 1 and self._run() == 0 and self._literals() == 0:
            self.buffer[self.rlw] &= ~1
        elif self._literals() != 0 or self.buffer[self.rlw] & 1:
            self._push_marker()
        can_add = min(number, LARGEST_RUN - self._run())
        self._set_run(self._run() + can_add)
        number -= can_add
        while number >= LARGEST_RUN:
            self._push_marker()
            self._set_run(LARGEST_RUN)
            number -= LARGEST_RUN
        if number > 0:
            self._push_marker()
            self._set_run(number)

    def _add_literal(self, word: int) -> None:
        current = self._literals()
        if current >= LARGEST_LITERALS:
            self._push_marker()
            self._set_literals(1)
        else:
            self._set_literals(current + 1)
        self.buffer.append(word)

    def _add_full_word(self) -> None:
        """add_empty_word(self, 1): a word of ones joins or starts a run of ones."""
        no_literal = self._literals() == 0
        run = self._run()
        if no_literal and run == 0:
            self.buffer[self.rlw] |= 1
        if no_literal and self.buffer[self.rlw] & 1 and run < LARGEST_RUN:
            self._set_run(run + 1)
            return
        self._push_marker()
        self.buffer[self.rlw] |= 1
        self._set_run(1)

    def set(self, i: int) -> None:
        """ewah_set: position ``i``, not below any set before."""
        if i < self.bit_size:
            raise EwahError(f"bit {i} set out of order")
        dist = (i + WORD_BITS) // WORD_BITS - (self.bit_size + WORD_BITS - 1) // WORD_BITS
        self.bit_size = i + 1
        bit = 1 << (i % WORD_BITS)
        if dist > 0:
            if dist > 1:
                self._add_empty_words(dist - 1)
            self._add_literal(bit)
            return
        if self._literals() == 0:
            self._set_run(self._run() - 1)
            self._add_literal(bit)
            return
        self.buffer[-1] |= bit
        if self.buffer[-1] == ALL_ONES:
            self.buffer.pop()
            self._set_literals(self._literals() - 1)
            self._add_full_word()


def encode(positions: Iterable[int]) -> bytes:
    """The bytes git writes for a bitmap with ``positions`` set (increasing; an empty
    one is git's ``ewah_new()``: no bits, one empty marker word)."""
    b = _Builder()
    for i in positions:
        b.set(i)
    n = len(b.buffer)
    return _HEAD.pack(b.bit_size, n) + struct.pack(f">{n}Q", *b.buffer) + _U32.pack(b.rlw)

"""-insert-dma's work split keeps the CPEs' DMA writes in separate 32-byte
blocks of main memory (swir/analysis/write_blocks.py): each case is a
buffered-stage kernel, split by the pass, and checked by brute force: every
CPE's share of the parallel loop (chunk's formula, run as the interpreters
run it), every byte its copy_outs write (the subscripts evaluated here, not
by the analysis), no block written by two CPEs. The emulation checks the same
at run time (test_emu_runtime.py's shared_block case)."""

from __future__ import annotations

import pytest

from swir.analysis.write_blocks import BLOCK, chunk_cuts
from swir.ops.loop import chunk_code
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassManager

MAIN = """
func @main(%x: buf<{shape} x f32>, %out: buf<{shape} x f32>) attributes {{outputs = 1}} {{
'entry:
  call @k(%x, %out)
  return
}}
"""


def module(shape: str, extent: int, workers: int, body: str) -> str:
    return (f'module "m"\nstage buffered {{ldm_size = 65536}}\n\n'
            f"kernel @k(%X: buf<{shape} x f32>, %Y: buf<{shape} x f32>) {{\n"
            f"  parallel %p = 0 to {extent} {{workers = {workers}}} {{\n{body}  }}\n}}\n"
            + MAIN.format(shape=shape))


def shares(extent: int, workers: int, grain: int) -> list[range]:
    """Each worker's iterations, by the interpreters' chunk code."""
    out = []
    for w in range(workers):
        env = {"w": w}
        for line in chunk_code("w", "lo", "hi", extent, workers, grain):
            exec(line, {}, env)
        out.append(range(env["lo"], env["hi"]))
    return out


def split(text: str) -> tuple[int, int, int]:
    """(extent, workers, grain) of the one chunk -insert-dma made."""
    m = parse_module(text, "<case>")
    PassManager([pass_class("insert-dma")()]).run(m)
    (chunk,) = [i for i in m.walk() if i.opname == "chunk"]
    return chunk.attrs["extent"], chunk.attrs["workers"], chunk.attrs.get("grain", 1)


def assert_no_shared_block(extent, workers, grain, written) -> None:
    owner: dict[int, int] = {}
    for w, its in enumerate(shares(extent, workers, grain)):
        for p in its:
            for byte in written(p):
                blk = byte // BLOCK
                assert owner.setdefault(blk, w) == w, \
                    f"CPEs {owner[blk]} and {w} both write block {blk} (iteration {p})"


def test_rows_of_whole_blocks_keep_every_cpe():
    """64 rows of 256 bytes: a cut between any two rows is a block boundary."""
    body = ("    %L = ldm_alloc : ldm<1 x 64 x f32>\n"
            "    copy_in %X[%p : %p + 1, 0 : 64] -> %L\n"
            "    copy_out %L -> %Y[%p : %p + 1, 0 : 64]\n")
    extent, workers, grain = split(module("64 x 64", 64, 64, body))
    assert (extent, workers, grain) == (64, 64, 1)
    assert_no_shared_block(extent, workers, grain, lambda p: range(p * 256, p * 256 + 256))


def test_two_puts_into_one_buffer_are_checked_together():
    """Rows of 36 bytes written by two copy_outs (4 + 32 bytes): each put
    alone separates at row 7, but the second put's end of row 6 and the
    first put's start of row 7 share a block: the split in units of one row
    (cut at 7) is refused, the one in units of 2 (cut at 8, 288 bytes, 9
    blocks) taken."""
    body = ("    %A = ldm_alloc : ldm<1 x 1 x f32>\n"
            "    %B = ldm_alloc : ldm<1 x 8 x f32>\n"
            "    copy_in %X[%p : %p + 1, 0 : 1] -> %A\n"
            "    copy_in %X[%p : %p + 1, 1 : 9] -> %B\n"
            "    copy_out %A -> %Y[%p : %p + 1, 0 : 1]\n"
            "    copy_out %B -> %Y[%p : %p + 1, 1 : 9]\n")
    extent, workers, grain = split(module("14 x 9", 14, 2, body))
    assert grain == 2 and chunk_cuts(extent, workers, grain) == [8]
    assert_no_shared_block(extent, workers, grain, lambda p: range(p * 36, p * 36 + 36))


def test_a_long_loop_that_does_not_move_forward_goes_to_one_cpe():
    """20,000 iterations (beyond the limit where every iteration is looked
    at) writing column p // 100 of row p mod 100: consecutive iterations jump
    800 bytes, so the two at a cut say nothing about the others. No rule
    applies: one CPE writes it all."""
    body = ("    %L = ldm_alloc : ldm<1 x 1 x f32>\n"
            "    copy_in %X[%p mod 100 : %p mod 100 + 1, %p floordiv 100 : %p floordiv 100 + 1]"
            " -> %L\n"
            "    copy_out %L -> %Y[%p mod 100 : %p mod 100 + 1, %p floordiv 100 : "
            "%p floordiv 100 + 1]\n")
    extent, workers, grain = split(module("100 x 200", 20000, 64, body))
    assert grain == extent == 20000
    assert_no_shared_block(extent, workers, grain,
                           lambda p: range((p % 100) * 800 + (p // 100) * 4,
                                           (p % 100) * 800 + (p // 100) * 4 + 4))


@pytest.mark.parametrize("extent,workers,grain", [(7, 64, 1), (100, 64, 3), (21, 4, 2),
                                                  (1000, 64, 128), (5, 64, 5)])
def test_chunk_cuts_are_where_chunks_shares_meet(extent, workers, grain):
    parts = shares(extent, workers, grain)
    assert sorted(set(r.start for r in parts if r and r.start)) == chunk_cuts(extent, workers,
                                                                               grain)
    assert sum(len(r) for r in parts) == extent


def test_interleaved_tiles_split_by_their_blocks():
    """ResNet-18's 128 x 28 x 28 conv output in tiles of 4 channels x 4 rows:
    the parallel loop runs over (channel tile, row tile), 7 row tiles per
    channel tile. Each iteration's hull spans its 4 channel planes, so the
    hulls of one channel tile's row tiles overlap; their blocks do not (a
    row tile is 448 bytes, 14 blocks, in every plane): the blocks themselves
    allow a cut between any two iterations. A variant whose row tiles are 7
    rows (784 bytes: a block straddles two of them) must keep a channel
    tile's row tiles on one CPE where their rows meet mid-block."""
    def body(rows: int) -> str:
        tiles = -(-28 // rows)
        c = f"4*(%p floordiv {tiles})"
        h = f"{rows}*(%p mod {tiles})"
        return (f"    %L = ldm_alloc : ldm<1 x 4 x {rows} x 28 x f32>\n"
                f"    copy_in %X[0 : 1, {c} : {c} + 4, {h} : {h} + {rows}, 0 : 28] -> %L\n"
                f"    copy_out %L -> %Y[0 : 1, {c} : {c} + 4, {h} : {h} + {rows}, 0 : 28]\n")

    def written(rows: int):
        tiles = -(-28 // rows)

        def bytes_of(p: int):
            c, h = 4 * (p // tiles), rows * (p % tiles)
            return [((c + k) * 28 * 28 + r * 28) * 4 + b
                    for k in range(4) for r in range(h, min(h + rows, 28)) for b in range(112)]
        return bytes_of

    extent, workers, grain = split(module("1 x 16 x 28 x 28", 28, 64, body(4)))
    assert (extent, workers, grain) == (28, 64, 1)
    assert_no_shared_block(extent, workers, grain, written(4))
    extent, workers, grain = split(module("1 x 16 x 28 x 28", 16, 64, body(7)))
    assert grain > 1
    assert_no_shared_block(extent, workers, grain, written(7))


def test_edge_tiles_inside_the_loop_are_bounded_exactly():
    """VGG-16's first conv: each iteration (an output row of 224) writes its
    row in column tiles of 128, the last one 96 wide (its extent a min over
    the tile loop's variable, not extreme at that loop's corners). Every
    point of the tile loop is evaluated, so the rows (896 bytes, 28 blocks)
    split between any two: before, no hull was found and one CPE wrote all."""
    body = ("    for %t = 0 to 2 {\n"
            "      %L = ldm_alloc : ldm<1 x 128 x f32>\n"
            "      copy_in %X[%p : %p + 1, 128*%t : 128*%t + min(128, -128*%t + 224)] -> %L\n"
            "      copy_out %L -> %Y[%p : %p + 1, 128*%t : 128*%t + min(128, -128*%t + 224)]\n"
            "    }\n")
    extent, workers, grain = split(module("224 x 224", 224, 64, body))
    assert (extent, workers, grain) == (224, 64, 1)
    assert_no_shared_block(extent, workers, grain, lambda p: range(p * 896, p * 896 + 896))

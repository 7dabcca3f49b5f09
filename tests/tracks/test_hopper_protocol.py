"""The barrier protocol of the Hopper worklog's warp-specialised steps (4 to 7), run as a model on the CPU: a
producer and consumer warpgroups in each block of a cluster, mbarriers with their arrival counts, phases and
transaction bytes, TMA copies and wgmma groups that complete in a random order, every interleaving the scheduler
picks. The model follows the references' loops (tracks/hopper/solutions/specialised.cu to persistent.cu: which
barrier each waits on with which parity, who arrives where); it is not the kernels, whose runs only a GPU gives.
It checks that no copy lands in a stage a consumer still reads, that a consumer reads only its own slab's tiles,
that no barrier gets more arrivals than its phase counts, and that nothing waits for ever; and that the
known-wrong protocols fail so (a producer that runs ahead of the empty barrier, a multicast to its own block)."""
from __future__ import annotations

import random

import pytest

A_BYTES = B_BYTES = 16384   # a block's A tile; its share of B's (all of it without a cluster)


class Violation(AssertionError):
    pass


class Barrier:
    """An mbarrier: ``count`` arrivals and the expected bytes complete a phase."""

    def __init__(self, count: int):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0

    def arrive(self, expect_bytes: int = 0) -> None:
        self.tx += expect_bytes
        self.pending -= 1
        if self.pending < 0:
            raise Violation("more arrivals than the phase counts")
        self._complete()

    def complete_tx(self, nbytes: int) -> None:
        self.tx -= nbytes
        self._complete()

    def _complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase, self.pending = self.phase + 1, self.count

    def done(self, parity: int) -> bool:
        """try_wait.parity: the phase of that parity has completed (the current one has the other parity)."""
        return self.phase % 2 != parity


def run(seed: int, *, stages: int, slabs: int, tiles: int, cluster: int, consumers: int, wait_empty: bool = True,
        mask_all: bool = True) -> None:
    rng = random.Random(seed)
    full = [[Barrier(1) for _ in range(stages)] for _ in range(cluster)]
    empty = [[Barrier(consumers * cluster) for _ in range(stages)] for _ in range(cluster)]
    parts = ["A", *(f"B{r}" for r in range(cluster))]
    held = [[dict.fromkeys(parts) for _ in range(stages)] for _ in range(cluster)]   # the slab each part holds
    readers = [[set() for _ in range(stages)] for _ in range(cluster)]
    pending: list = []   # copies in flight and wgmma groups running: each completes when the scheduler picks it

    def copy(block: int, s: int, part: str, it: int):
        def land():
            if readers[block][s]:
                raise Violation(f"a copy landed in stage {s} of block {block} while {readers[block][s]} read it")
            held[block][s][part] = it
            full[block][s].complete_tx(A_BYTES if part == "A" else B_BYTES)
        return land

    def producer(rank: int):
        for it in range(tiles * slabs):   # slabs counted across tiles (the persistent step's it)
            s = it % stages
            if it >= stages and wait_empty:
                while not empty[rank][s].done((it // stages - 1) % 2):
                    yield
            full[rank][s].arrive(A_BYTES + cluster * B_BYTES)
            yield
            pending.append(copy(rank, s, "A", it))
            for block in (range(cluster) if mask_all else [rank]):
                pending.append(copy(block, s, f"B{rank}", it))
            yield

    def consumer(rank: int, c: int):
        groups: list[list[bool]] = []

        def release(it: int):
            for block in range(cluster):
                empty[block][it % stages].arrive()

        for tile in range(tiles):
            for kt in range(slabs):
                it = tile * slabs + kt
                s = it % stages
                while not full[rank][s].done(it // stages % 2):
                    yield
                if set(held[rank][s].values()) != {it}:
                    raise Violation(f"slab {it} read tiles of slabs {held[rank][s]}")
                group = [False]
                readers[rank][s].add((c, it))

                def finish(group=group, s=s, it=it):
                    group[0] = True
                    readers[rank][s].discard((c, it))
                pending.append(finish)
                groups.append(group)
                yield
                while not all(g[0] for g in groups[:-1]):   # wgmma.wait_group 1: groups complete in order
                    yield
                if kt > 0:
                    release(it - 1)
                    yield
            while not all(g[0] for g in groups):   # wgmma.wait_group 0, then the tile's last stage back
                yield
            release(tile * slabs + slabs - 1)
            yield

    alive = [producer(r) for r in range(cluster)] + [consumer(r, c) for r in range(cluster) for c in range(consumers)]
    stalled = 0
    while alive or pending:
        if pending and (not alive or rng.random() < 0.3):
            pending.pop(rng.randrange(len(pending)))()
            stalled = 0
            continue
        thread = rng.choice(alive)
        try:
            next(thread)
        except StopIteration:
            alive.remove(thread)
        stalled += 1
        if stalled > 20000:
            raise Violation("every thread waits and nothing is in flight: a deadlock")


# each step's protocol: its stages, blocks a cluster, consumers a block; tiles a block (the persistent step walks
# several, its slab count running on); slabs a tile that do not divide into the stages, and one slab
STEPS = {"specialised": dict(stages=3, cluster=1, consumers=1, tiles=1),
         "two_consumers": dict(stages=4, cluster=1, consumers=2, tiles=1),
         "cluster": dict(stages=4, cluster=2, consumers=2, tiles=1),
         "persistent": dict(stages=4, cluster=2, consumers=2, tiles=3)}


@pytest.mark.parametrize("slabs", [1, 5, 17])
@pytest.mark.parametrize("step", list(STEPS))
def test_the_protocol_holds_in_every_interleaving_tried(step, slabs):
    for seed in range(60):
        run(seed, slabs=slabs, **STEPS[step])


@pytest.mark.parametrize("step", list(STEPS))
def test_a_producer_ahead_of_the_empty_barrier_breaks_it(step):
    """producer_ahead_of_empty.cu: a copy lands in a stage being read, or a full barrier is over-arrived."""
    with pytest.raises(Violation):
        for seed in range(60):
            run(seed, slabs=17, wait_empty=False, **STEPS[step])


def test_a_multicast_to_its_own_block_waits_for_ever():
    """multicast_to_own_block.cu: each full barrier waits for the half of B the other block never sends it."""
    with pytest.raises(Violation, match="deadlock"):
        run(0, slabs=5, mask_all=False, **STEPS["cluster"])

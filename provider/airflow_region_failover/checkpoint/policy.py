"""When state runs are compacted, and which checkpoints are retained. Pure (standard library only).

Compaction (Flink's incremental checkpoints: "a background task called compaction is constantly merging sstables to
consolidate potential duplicate entries for each key ... Old sstables are eventually replaced by the sstable that is
the result of merging them ... accept a small amount of redundant state writing to incrementally introduce
merged/consolidated replacements for previous checkpoints"), with the rules of RocksDB's universal compaction, in
order, over a member's runs *after* this checkpoint's delta was added (oldest, the base, first):

1. **Size amplification**: when the deltas together exceed ``max_size_amplification`` percent of the base, every
   run is merged into a new base (a full compaction: its tombstones vanish).
2. **Run count**: when there are more than ``max_sorted_runs`` runs, the newest runs are merged into one — as many
   as bring the count back to ``max_sorted_runs``, and further older runs while each is at most
   :data:`SIZE_RATIO_PERCENT` percent larger than what is merged so far (similar sizes merge, so the cost of a
   merge stays proportional to what it consolidates). A merge that reaches the base is a full compaction.

Otherwise nothing is merged: the checkpoint re-references every older run and uploads only its delta.

Retention (Flink's ``state.checkpoints.num-retained``: "we assume that the number of retained checkpoints
is configured to 2, so that Flink will always keep the two latest checkpoints and older checkpoints are pruned"):
after a checkpoint completes, a subtask keeps its ``num_retained`` newest completed checkpoints (by sequence
number) and drops the others — their manifests only; a shared file a retained checkpoint still lists stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SIZE_RATIO_PERCENT = 1
"""RocksDB universal compaction's default ``size_ratio``: an older run joins a merge when it is at most this much
larger (in percent) than the runs merged so far."""


@dataclass(frozen=True)
class Compaction:
    """Merge ``runs[start:]`` into one run (``start == 0``: a full compaction into a new base), and why."""

    start: int
    reason: str

    @property
    def full(self) -> bool:
        """Whether the merge includes the base."""
        return self.start == 0


def plan_compaction(sizes: Sequence[int], max_sorted_runs: int, max_size_amplification: int,
                    size_ratio: int = SIZE_RATIO_PERCENT) -> Compaction | None:
    """The compaction a checkpoint whose member has runs of ``sizes`` (rows, tombstones included: known before
    anything is encoded; base first, this checkpoint's delta last) performs, or ``None`` (module rules)."""
    if len(sizes) < 2:
        return None
    base, deltas = sizes[0], sum(sizes[1:])
    if deltas * 100 > max_size_amplification * base:
        return Compaction(0, f"deltas of {deltas} rows exceed {max_size_amplification}% of the {base}-row base")
    if len(sizes) <= max_sorted_runs:
        return None
    start = len(sizes) - (len(sizes) - max_sorted_runs + 1)
    merged = sum(sizes[start:])
    while start > 0 and sizes[start - 1] * 100 <= merged * (100 + size_ratio):
        start -= 1
        merged += sizes[start]
    return Compaction(start, f"{len(sizes)} runs exceed {max_sorted_runs}: the newest {len(sizes) - start} merge")


def retained(seqs: Sequence[int], num_retained: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(kept, dropped)``: the ``num_retained`` highest of ``seqs`` and the others, each ascending (module rule)."""
    ordered = sorted(set(seqs))
    cut = max(0, len(ordered) - max(1, num_retained))
    return tuple(ordered[cut:]), tuple(ordered[:cut])


def due(epoch_end_ms: int, last_checkpoint_ms: int, interval_ms: int, last_epoch: bool) -> bool:
    """Whether an epoch boundary takes a checkpoint: always after the last epoch, else when at least
    ``interval_ms`` (``execution.checkpointing.interval``; 0: every boundary) passed since the last one."""
    return last_epoch or epoch_end_ms - last_checkpoint_ms >= interval_ms

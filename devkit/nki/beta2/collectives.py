"""``nki.collectives``: collective communication across NeuronCores.

AWS's CPU simulator does not implement collectives (``reference/nki_beta2.md`` §2) and neither does the
devkit: every call raises :class:`devkit.errors.UnsupportedError` (rule ``collectives-not-simulated``) at the
kernel line that made it.
"""

from __future__ import annotations

from typing import Any

from devkit.nki.beta2._convention import refusing

__all__ = [
    "ReplicaGroup",
    "all_gather",
    "all_gather_v",
    "all_reduce",
    "all_to_all",
    "all_to_all_v",
    "collective_permute",
    "collective_permute_implicit",
    "collective_permute_implicit_current_processing_rank_id",
    "collective_permute_implicit_reduce",
    "rank_id",
    "reduce_scatter",
]


def _not_simulated(name: str) -> Any:
    message = (
        f"nki.collectives.{name} is not simulated (collectives need several NeuronCores; neither AWS's CPU "
        "simulator nor the devkit models them)"
    )
    return refusing(
        name, f"``{name}``: not simulated (raises UnsupportedError).", message, rule="not-simulated"
    )


class ReplicaGroup:
    """A group of ranks taking part in a collective (accepted; the collective itself is not simulated)."""

    def __init__(self, *groups: Any, **kwargs: Any) -> None:
        self.groups = groups


all_reduce = _not_simulated("all_reduce")
all_gather = _not_simulated("all_gather")
all_gather_v = _not_simulated("all_gather_v")
reduce_scatter = _not_simulated("reduce_scatter")
all_to_all = _not_simulated("all_to_all")
all_to_all_v = _not_simulated("all_to_all_v")
collective_permute = _not_simulated("collective_permute")
collective_permute_implicit = _not_simulated("collective_permute_implicit")
collective_permute_implicit_reduce = _not_simulated("collective_permute_implicit_reduce")
collective_permute_implicit_current_processing_rank_id = _not_simulated(
    "collective_permute_implicit_current_processing_rank_id"
)
rank_id = _not_simulated("rank_id")

"""The non-finite guard: a step whose loss or gradient norm is inf or nan on any rank is skipped on every
rank (no optimizer update, the gradients dropped), counted and logged; too many in a row stop the run.

Every rank reaches the same verdict from one all-reduce of a small table (a row per rank: loss not finite,
grad norm not finite, the loss itself for the spike detector), so no rank steps while another skips, and
the table says which rank saw what. The verdict stays on the device: it reaches the optimizer as fused
AdamW's ``found_inf`` (the kernel leaves weights, moments and step count alone when it is set), and the
host reads the table only on steps that log, validate or checkpoint (``NonFinite.from_table``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from dataprep.core.errors import CcpretrainError

CAUSES = ("loss", "grad_norm")
LOSS_NOT_FINITE, GRAD_NORM_NOT_FINITE, LOSS = range(3)  # the columns of ``step_table``


class NonFiniteError(CcpretrainError, RuntimeError):
    """Too many consecutive steps with a non-finite loss or gradient norm: the run stops rather than spin."""

    exit_status = 3  # the run stopped on purpose (README's exit statuses)


@dataclass(frozen=True)
class NonFinite:
    """The ranks that saw a non-finite loss, and those that saw a non-finite gradient norm, at one step."""

    loss_ranks: tuple[int, ...]
    grad_norm_ranks: tuple[int, ...]

    @property
    def cause(self) -> str:
        """ "loss", "grad_norm" or "loss+grad_norm"."""
        return "+".join(name for name, ranks in zip(CAUSES, (self.loss_ranks, self.grad_norm_ranks)) if ranks)

    @property
    def rank(self) -> int:
        """The first rank at fault: a non-finite loss is where a bad gradient comes from."""
        return (self.loss_ranks or self.grad_norm_ranks)[0]

    @classmethod
    def from_table(cls, table: torch.Tensor) -> "NonFinite | None":
        """What a host copy of ``step_table`` says; None when every value was finite."""
        bad = table[:, :LOSS] > 0
        if not bad.any():
            return None
        ranks = [
            tuple(bad[:, column].nonzero().flatten().tolist()) for column in (LOSS_NOT_FINITE, GRAD_NORM_NOT_FINITE)
        ]
        return cls(*ranks)


def step_table(loss: torch.Tensor, grad_norm: torch.Tensor | None, holds_loss: bool = True) -> torch.Tensor:
    """Every rank's (loss not finite, grad norm not finite, loss) as a world x 3 table on the device, the
    same on every rank: one all-reduce over the world, no read back. ``grad_norm`` None: not checked (fp16:
    the scaler judges gradients); ``holds_loss`` false: a pipeline stage without the loss (zeros)."""
    world = dist.get_world_size() if dist.is_initialized() else 1
    rank = dist.get_rank() if dist.is_initialized() else 0
    table = torch.zeros(world, 3, device=loss.device)
    value = loss.detach().float() if holds_loss else torch.zeros((), device=loss.device)
    norm = grad_norm.detach() if grad_norm is not None else torch.zeros((), device=loss.device)
    table[rank] = torch.stack([(~torch.isfinite(value)).float(), (~torch.isfinite(norm)).float(), value])
    if world > 1:
        dist.all_reduce(table)
    return table


def any_non_finite(table: torch.Tensor) -> torch.Tensor:
    """The guard's verdict on the device: a 0-d float, 1 where some rank saw a non-finite value."""
    return (table[:, :LOSS] > 0).any().float()


def find_non_finite(loss: torch.Tensor, grad_norm: torch.Tensor | None) -> NonFinite | None:
    """Which ranks' loss or gradient norm (None: not checked) is not finite; None when every value on
    every rank is. A collective over the world group, read back at once."""
    return NonFinite.from_table(step_table(loss, grad_norm).cpu())


class SkipCounter:
    """Skipped steps, all of them and those in a row; more than ``max_consecutive`` in a row is the end."""

    def __init__(self, max_consecutive: int):
        self.max_consecutive, self.total, self.consecutive = max_consecutive, 0, 0

    def count(self, found: NonFinite | None) -> bool:
        """Count a step's verdict; returns whether the step was skipped."""
        self.consecutive = self.consecutive + 1 if found else 0
        self.total += bool(found)
        return found is not None

    @property
    def exhausted(self) -> bool:
        return self.consecutive > self.max_consecutive

    def record(self, step: int, found: NonFinite) -> dict:
        """The metrics record of a skipped step."""
        return {
            "kind": "skip",
            "step": step,
            "rank": found.rank,
            "cause": found.cause,
            "loss_ranks": list(found.loss_ranks),
            "grad_norm_ranks": list(found.grad_norm_ranks),
            "consecutive": self.consecutive,
            "skipped_total": self.total,
        }

    def error(self, step: int, found: NonFinite) -> NonFiniteError:
        return NonFiniteError(
            f"step {step}: {found.cause} not finite (rank {found.rank}), {self.consecutive} steps in a row, more "
            f"than max_consecutive_skips {self.max_consecutive}: stopped after a checkpoint at step {step}; look "
            "at the data and the learning rate, then resume with --resume auto (or raise max_consecutive_skips)"
        )

"""H-ADPSGD's layout check: learners that derive different group sizes (nodes running different numbers
of learners, each taking M from its LOCAL_WORLD_SIZE) stop with one line before any group of M is made,
instead of calling new_group differently and hanging."""

from __future__ import annotations

import pytest
import torch

from asrtrain.distributed.hadpsgd import HADPSGD
from asrtrain.distributed.runtime.launch import run_learners
from asrtrain.errors import AsrError

pytestmark = pytest.mark.slow  # spawned learners


def disagreeing(rank: int, world_size: int, _args) -> None:
    """Ranks 0-1 think M=2 (two groups), ranks 2-3 think M=1 (four groups): both layouts are valid alone."""
    strategy = HADPSGD(rank, world_size, group_size=2 if rank < 2 else 1)
    model = torch.nn.Linear(3, 1)
    strategy.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))


def test_learners_that_disagree_on_the_group_size_stop_with_one_line(capfd):
    with pytest.raises(AsrError, match="disagree on the group size") as failure:
        run_learners(disagreeing, None, learners=4, backend="gloo", timeout_s=30)
    line = failure.value.render()  # the failing learner's own line, told once by the parent
    assert "(M=1 on 2 learners, M=2 on 2 learners)" in line and "fix: give --learners-per-node" in line
    assert "\n" not in line and "Traceback" not in capfd.readouterr().err


def test_resume_under_another_group_size_is_refused():
    """Issue 58/9: a 2x8 checkpoint resumed as 4x4 would land pending deltas in half a group."""
    saved = HADPSGD(0, 16, group_size=8)
    saved._loaded_round, saved._loaded_pending = 3, None
    state = saved.state_dict()
    assert state["group_size"] == 8
    HADPSGD(0, 16, group_size=8).load_state_dict(state)  # the same layout resumes
    with pytest.raises(AsrError, match="groups of 8 learners.*groups of 4") as err:
        HADPSGD(0, 16, group_size=4).load_state_dict(state)
    assert "\n" not in err.value.render()

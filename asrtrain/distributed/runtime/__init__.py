"""The process runtime of a multi-learner job, apart from the strategies: :mod:`.launch` (local spawn,
torchrun and Slurm environments, process groups), :mod:`.peerwatch` (heartbeats and the verdict a failing
learner leaves for the others) and :mod:`.beacon` (each learner's progress record, which names the learner
whose main thread is stuck)."""

import os

# One intra-op thread per test process: the suite runs on 2 cores and spawns learners.
os.environ.setdefault("OMP_NUM_THREADS", "1")

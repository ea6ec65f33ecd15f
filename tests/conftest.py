import os
import sys
from pathlib import Path

# One intra-op thread per test process: the suite runs on 2 cores and spawns learners.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Test helper modules (fixtures that write corpora) live beside the tests.
for sub in ("", "train", "score", "distributed"):
    sys.path.insert(0, str(Path(__file__).parent / sub))

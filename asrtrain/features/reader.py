"""TEMPORARY minimal reader (replaced by the features branch)."""
from pathlib import Path
import numpy as np
import yaml
import kaldiio
from asrtrain.config import FeatureConfig, section_from_dict


class FeatureReader:
    def __init__(self, feat_dir):
        self.dir = Path(feat_dir)
        self.scp = kaldiio.load_scp(str(self.dir / "feats.scp"))
        self.config = section_from_dict(FeatureConfig, yaml.safe_load((self.dir / "features.yaml").read_text()))
        self._n = {}
        p = self.dir / "utt2num_frames"
        if p.is_file():
            for line in p.read_text().split("\n"):
                if line.strip():
                    u, n = line.split()
                    self._n[u] = int(n)
        st = kaldiio.load_mat(str(self.dir / "cmvn_global.ark"))
        cnt = st[0, -1]
        self.mean = (st[0, :-1] / cnt).astype(np.float32)
        self.std = np.sqrt(np.maximum(st[1, :-1] / cnt - self.mean ** 2, 1e-10)).astype(np.float32)

    def keys(self):
        return list(self.scp.keys())

    def num_frames(self, utt):
        return self._n[utt] if utt in self._n else self.scp[utt].shape[0]

    @property
    def dim(self):
        return self.scp[next(iter(self.scp.keys()))].shape[1]

    def load(self, utt):
        return ((self.scp[utt] - self.mean) / self.std).astype(np.float32)

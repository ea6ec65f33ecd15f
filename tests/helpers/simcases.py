"""Small clusters and workloads the simulator's tests build their cases from."""

from asrtrain.simulate.model import Cluster, Link, Workload

FREE = Link(0.0, 1e30)  # no latency, (practically) infinite bandwidth


def cluster(intra=FREE, inter=FREE, per_node=8, overhead=0.0, fold=0.0, cores=0):
    return Cluster(intra, inter, per_node, overhead, fold, cores)


def work(**kw):
    base = dict(step_s=1.0, batches=64, params=1000, bytes_per_param=4)
    base.update(kw)
    return Workload(**base)


def shared(cores, per_node=8, link=FREE):
    return cluster(link, link, per_node, cores=cores)

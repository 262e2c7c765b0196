"""The Ray executor: the same jobs as Ray tasks, on this machine or a cluster (``pip install mmdkit[ray]``).

In: planned jobs, the ``Store`` (a folder every node sees, or an fsspec URL), ``address`` ('local'
starts a Ray instance here with ``num_cpus``; 'auto' or 'HOST:PORT' connect to a running cluster).
Out: one results row per job, handed to ``on_row`` as tasks finish. Each task declares its resources
(``cpus_per_job`` CPUs; a GPU for mp4/png jobs when the cluster has GPUs) and is retried by Ray up
to ``retries`` times when its worker dies; a job's own failure is its row, never retried. At most
``window`` tasks are in flight, so a 100,000-job manifest does not flood the object store.
"""

from __future__ import annotations

from mmdkit.batch import worker
from mmdkit.batch.manifest import RENDER_OUTPUTS
from mmdkit.errors import UnavailableError

_worker = None
"""This Ray worker process's ``worker.Worker`` (its numba threads, its model cache): Ray reuses
worker processes, so it is made by the first task a process runs and kept."""


def _ray():
    try:
        import ray
    except ImportError:
        raise UnavailableError("--ray needs Ray: pip install 'mmdkit[ray]'") from None
    return ray


def _task(job, store, threads: int) -> dict:
    global _worker
    if _worker is None:
        _worker = worker.Worker(threads)
    row = _worker.run(job, store)
    import ray

    row["node"] = ray.get_runtime_context().get_node_id()[:12]
    return row


def connect(address: str, num_cpus: int | None = None):
    """ray.init for 'local' (a new instance here, no dashboard), 'auto' or an address; returns ray."""
    ray = _ray()
    if ray.is_initialized():
        return ray
    try:
        if address == "local":
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        detail = " ".join(str(e).split())[:200]
        raise UnavailableError(f"--ray {address}: no Ray cluster could be reached ({detail}); start one with "
                               f"'ray start --head' or use --ray local") from None
    return ray


def run_ray(jobs, store, on_row, *, address: str = "local", num_cpus: int | None = None, cpus_per_job: float = 1,
            retries: int = 3, window: int = 2000) -> None:
    """Run ``jobs`` as Ray tasks, calling ``on_row`` per finished job (in completion order)."""
    ray = connect(address, num_cpus)
    gpus = ray.cluster_resources().get("GPU", 0) > 0
    threads = max(1, int(cpus_per_job))
    remote = ray.remote(_task)
    by_ref, queue = {}, list(reversed(jobs))
    while queue or by_ref:
        while queue and len(by_ref) < window:
            job = queue.pop()
            gpu = 1 if gpus and any(o in RENDER_OUTPUTS for o in job.outputs) else 0
            ref = remote.options(num_cpus=cpus_per_job, num_gpus=gpu, max_retries=retries,
                                 retry_exceptions=False).remote(job, store, threads)
            by_ref[ref] = job
        ready, _ = ray.wait(list(by_ref), num_returns=1, timeout=None)
        for ref in ready:
            job = by_ref.pop(ref)
            try:
                on_row(ray.get(ref))
            except ray.exceptions.RayError as e:  # the worker died more than ``retries`` times
                from mmdkit.batch.plan import job_row

                on_row(job_row(job, "failed", error=f"{job.where}: Ray task failed: {type(e).__name__} "
                                                    f"(worker lost {retries + 1} times)"))

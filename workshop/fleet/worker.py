"""``workshop worker``: one Celery worker bound to one GPU, or a simulator worker on a CPU-only machine.

A GPU worker sees only its GPU (``CUDA_VISIBLE_DEVICES``) and takes tasks from the queue named for the GPU
model (``gpu-nvidia-h200``), so a course can send a track to the hardware its targets were measured on. A
simulator worker (``--sim``, or any machine without a GPU) takes the ``sim`` queue: numba kernels run in
numba-cuda's simulator and GPU-only grading is refused. Concurrency is 1: timed kernels have the GPU to
themselves. Run one worker per GPU on a multi-GPU host (``--gpu 0``, ``--gpu 1``, ...), on as many hosts as
share the broker. A worker never holds the gradebook: ``WORKSHOP_GRADEBOOK_URL`` is dropped from its
environment. While it lives it renews its hold on the tasks it has taken (`workshop.fleet.lease`): when it is
lost, its task goes to another worker within a visibility timeout.
"""
from __future__ import annotations

import os
import re
import socket

from workshop.fleet.app import SIM_QUEUE


def gpu_queue(name: str) -> str:
    """The queue of a GPU model: ``NVIDIA H200`` -> ``gpu-nvidia-h200``."""
    return "gpu-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def bind(gpu: int | None, sim: bool) -> str:
    """Set this process's environment for one GPU (or the simulator); returns the queue to serve."""
    os.environ.pop("WORKSHOP_GRADEBOOK_URL", None)
    if not sim:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu or 0)
        from graders.gpu import detect_gpu
        info = detect_gpu()
        if info is not None:
            return gpu_queue(info.name)
        if gpu is not None:
            raise SystemExit(f"workshop worker: no CUDA GPU {gpu} here (CUDA_VISIBLE_DEVICES={gpu})")
    os.environ.update({"CUDA_VISIBLE_DEVICES": "", "WORKSHOP_GPU": "0", "WORKSHOP_TARGET": "sim",
                       "NUMBA_ENABLE_CUDASIM": "1"})
    return SIM_QUEUE


def run(gpu: int | None = None, sim: bool = False, name: str | None = None, loglevel: str = "INFO") -> int:
    queue = bind(gpu, sim)
    slot = "sim" if queue == SIM_QUEUE else f"gpu{os.environ['CUDA_VISIBLE_DEVICES']}"
    hostname = name or f"{slot}@{socket.gethostname()}"
    from kombu.utils.url import maybe_sanitize_url

    from workshop.fleet.app import app
    from workshop.fleet.lease import Renewal
    app.steps["worker"].add(Renewal)
    print(f"workshop worker {hostname}: queue {queue}, broker {maybe_sanitize_url(app.conf.broker_url)}",
          flush=True)
    app.worker_main(["worker", "--pool=prefork", "--concurrency=1", f"--queues={queue}", f"--hostname={hostname}",
                     f"--loglevel={loglevel}", "--without-gossip", "--without-mingle"])
    return 0

# GPU grading worker: nbgrader + this package on a CUDA runtime image. Needs the NVIDIA container toolkit
# (`docker run --gpus all`). Build from the repo root:
#   docker build -f docker/worker.Dockerfile -t kernel-workshop-worker .
#   docker run --gpus all --security-opt seccomp=unconfined -v "$PWD":/course -w /course \
#       kernel-workshop-worker nbgrader autograde puzzles
# Grading sandboxes student code with bubblewrap, which needs user namespaces: Docker's default seccomp
# profile refuses them, hence the seccomp option (autograde stops with a message without it).
# Not built in CI: the development machines have no Docker engine (see the closing notes of issue 3).
FROM nvidia/cuda:13.0.1-runtime-ubuntu24.04

RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv bubblewrap \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /opt/kernel-workshop
COPY pyproject.toml README.md ./
COPY graders graders
COPY gradebook gradebook
COPY workshop workshop
COPY tracks tracks
COPY assignments assignments
# torch's CUDA build (the worker needs it for buffers and the cuBLAS baseline), then the package itself.
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cu130 \
    && pip install --no-cache-dir -e .
RUN python -m ipykernel install --sys-prefix --name python3

CMD ["nbgrader", "--help"]

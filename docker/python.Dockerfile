# The Python environment the worker and coordinator images share: a venv at /opt/venv holding the project's
# pinned dependencies, installed with --no-index from the wheels in the build context (no network).
# Built by docker/build.sh with the context docker/wheels/cpu (bash docker/wheels.sh: the CPU torch wheel).
# A GPU image uses a context with the CUDA torch wheel instead (docker/README.md).
ARG BASE=kernel-workshop/debian:bookworm
FROM ${BASE} AS install
COPY . /wheels
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheels "setuptools>=68" wheel \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheels -r /wheels/requirements.txt \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --no-deps --find-links /wheels nvidia-cutlass==4.2.0.0

FROM ${BASE}
COPY --from=install /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1

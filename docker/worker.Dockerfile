# A grading worker: `workshop worker` as the unprivileged user `workshop`, with the project installed at
# /opt/kernel-workshop. The build context is made by docker/context.py: the code packages, nbgrader_config.py
# and each track's grader files; no solutions (except the references counter rules profile, see
# docker/README.md), no source notebooks, no gradebook. Submissions and their source notebooks arrive with
# each task. Built by docker/build.sh; run through docker/compose.yaml, or:
#   docker run --network host --security-opt seccomp=unconfined --security-opt systempaths=unconfined \
#     -e WORKSHOP_BROKER_URL=redis://127.0.0.1:6379/0 kernel-workshop/worker workshop worker --sim --name=sim1@host
# The grading sandbox (bubblewrap) needs user namespaces, which Docker's seccomp profile refuses, and mounts a
# fresh /proc, which Docker's masked /proc paths forbid: hence both security options.
ARG PYTHON_IMAGE=kernel-workshop/python:cpu
FROM ${PYTHON_IMAGE}
ARG UID=1000
RUN useradd --create-home --uid "${UID}" --user-group workshop
COPY . /opt/kernel-workshop
RUN pip install --no-cache-dir --no-index --no-deps --no-build-isolation -e /opt/kernel-workshop \
 && python -m ipykernel install --sys-prefix --name python3 \
 && workshop jupyter-config
USER workshop
WORKDIR /home/workshop
# Generated-assignment templates, one per source version (workshop/fleet/isolated.py).
ENV WORKSHOP_WORKER_CACHE=/home/workshop/.cache/workshop
CMD ["workshop", "worker", "--sim"]

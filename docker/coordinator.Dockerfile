# The coordinator: `workshop grade`, `workshop queue`, nbgrader (generate_assignment, export, formgrader) as
# the unprivileged user `workshop`, against the course directory mounted at the same path as on the host and
# the PostgreSQL gradebook named by WORKSHOP_GRADEBOOK_URL. The image holds the same files as the worker's
# (docker/context.py); the course (its solutions, source notebooks and submissions) is only ever mounted.
# Build with --build-arg UID=<the course directory's owner> so that it can write autograded/ there.
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
# Stays up; the TA runs commands in it: docker-compose exec -T coordinator workshop grade puzzles --course /course
CMD ["sleep", "infinity"]

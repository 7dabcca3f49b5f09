# redis-server and PostgreSQL from Debian's packages, for the compose file's `redis` and `postgres` services
# (no image registry needed). Built by docker/build.sh (apt-get needs the network: --network host).
ARG BASE=kernel-workshop/debian:bookworm
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-common \
 && echo "create_main_cluster = false" >> /etc/postgresql-common/createcluster.conf \
 && apt-get install -y --no-install-recommends redis-server postgresql-15 \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/lib/postgresql/15/bin:$PATH
COPY postgres.sh /usr/local/bin/workshop-postgres
USER postgres

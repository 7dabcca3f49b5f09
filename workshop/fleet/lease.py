"""A worker's hold on the tasks it has taken, renewed while it lives: how the fleet notices a lost worker.

Kombu's Redis transport keeps each message a worker has taken and not yet acknowledged in the ``unacked``
hash, indexed by when it was taken (``unacked_index``); every worker sweeps that index every few seconds and
puts each message taken more than the visibility timeout ago back at the front of its queue. A worker renews
the index entry of every message it holds (reserved, grading, or waiting to retry) every `app.renew_s`, from
a thread of its main process: a task stays with a live worker however long its grading takes, through a warm
shutdown too, and the task of a worker that was lost (its machine or container killed, its network cut) goes
back to the queue one visibility timeout after the worker's last renewal, for the next free worker, a
restarted one included. The index's times are the hosts' clocks: they must agree within a few seconds (NTP).
"""
from __future__ import annotations

import logging
import threading
import time

import redis
from celery import bootsteps
from celery.worker import state
from kombu.transport.redis import Channel

from workshop.fleet.app import renew_s

log = logging.getLogger(__name__)


def held_tags() -> list[str]:
    """The delivery tags of the messages this worker holds."""
    while True:
        try:
            return [request.message.delivery_tag for request in tuple(state.requests.values())]
        except RuntimeError:   # the consumer changed the mapping while it was copied
            continue


def renew(client: redis.Redis, tags: list[str]) -> None:
    """Mark the messages ``tags`` as taken now; a message already acknowledged or put back is left out."""
    if tags:
        client.zadd(Channel.unacked_index_key, dict.fromkeys(tags, time.time()), xx=True)


def _renew_forever(broker_url: str, every: float) -> None:
    client = redis.Redis.from_url(broker_url, socket_timeout=every, socket_connect_timeout=every)
    while True:
        time.sleep(every)
        try:
            renew(client, held_tags())
        except redis.RedisError as exc:
            log.warning("could not renew this worker's hold on its tasks: %s", exc)


class Renewal(bootsteps.StartStopStep):
    """Starts the renewal thread with the worker; it renews until the worker's process exits."""

    label = "task hold renewal"

    def start(self, worker) -> None:
        threading.Thread(target=_renew_forever, args=(worker.app.conf.broker_url, renew_s()), daemon=True,
                         name="workshop-renewal").start()

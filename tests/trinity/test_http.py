"""One pooled client per process: reused within it, built anew in a forked child."""

from __future__ import annotations

import os

import httpx

from trinity.http import ProcessClient


def test_a_process_reuses_its_client_and_a_forked_child_builds_its_own() -> None:
    built: list[int] = []

    def factory() -> httpx.Client:
        built.append(os.getpid())
        return httpx.Client()

    clients = ProcessClient(factory)
    parent = clients.get()
    assert clients.get() is parent and built == [os.getpid()]
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: report whether it built a client of its own, then leave
        own = clients.get() is not parent and built[-1] == os.getpid()
        os.write(write, b"own" if own else b"shared")
        os._exit(0)
    os.close(write)
    answer = os.read(read, 16)
    os.waitpid(child, 0)
    assert answer == b"own"
    assert clients.get() is parent  # the parent keeps its own
    parent.close()

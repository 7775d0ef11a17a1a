"""``python -m docker_proxy`` (from deploy/): the proxy, configured from the environment.

DOCKER_PROXY_IMAGE and DOCKER_PROXY_NETWORK (required: the agent image, and the agents'
network, the overlay TRINITY_SWARM_NETWORK names on a swarm manager), DOCKER_PROXY_LISTEN
(``0.0.0.0:2375``), DOCKER_PROXY_ENGINE (``/var/run/docker.sock``), DOCKER_PROXY_LABEL
(``trinity.agent``), DOCKER_PROXY_NAME_PREFIX (``trinity-agent-``).
"""

from __future__ import annotations

import logging
import os
import sys

from .policy import Policy
from .server import serve

logger = logging.getLogger("docker_proxy")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    image, network = os.environ.get("DOCKER_PROXY_IMAGE"), os.environ.get("DOCKER_PROXY_NETWORK")
    if not image or not network:
        sys.exit("DOCKER_PROXY_IMAGE and DOCKER_PROXY_NETWORK must be set")
    host, _, port = os.environ.get("DOCKER_PROXY_LISTEN", "0.0.0.0:2375").rpartition(":")  # noqa: S104
    policy = Policy(
        image=image,
        network=network,
        label=os.environ.get("DOCKER_PROXY_LABEL", "trinity.agent"),
        name_prefix=os.environ.get("DOCKER_PROXY_NAME_PREFIX", "trinity-agent-"),
    )
    server = serve(
        policy,
        listen=(host, int(port)),
        engine=os.environ.get("DOCKER_PROXY_ENGINE", "/var/run/docker.sock"),
    )
    logger.info("docker proxy on %s:%s for image %s, network %s", host, port, image, network)
    server.serve_forever()


if __name__ == "__main__":
    main()

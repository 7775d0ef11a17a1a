"""The provider simulator's HTTP surface: each provider's API, and the control API.

The routes live with what they serve: the Anthropic side in ``simulator/anthropic.py``,
the OpenAI side in ``simulator/codex.py``, both providers' sign-in in
``simulator/oauth.py``, the control API in
``simulator/control_api.py``; every API request is answered as ``simulator/answering.py``
says (counted in flight, held by the injected latency, recorded in the request log,
synchronous from check to spend).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from simulator.answering import Answering, Outcome, bearer_token
from simulator.anthropic import OAUTH_REVOKED, RATE_LIMITED, add_anthropic_routes, anthropic_error
from simulator.codex import add_openai_routes
from simulator.control_api import add_control_api
from simulator.device_auth import add_device_auth_routes
from simulator.oauth import add_oauth_routes
from simulator.state import Simulator

# Read here by the fleet benchmark (``bench/fleet/world.py``): the refusals it mirrors.
__all__ = ["OAUTH_REVOKED", "RATE_LIMITED", "create_app"]


def create_app(sim: Simulator | None = None) -> FastAPI:
    """The simulator app over ``sim`` (a fresh world when None)."""
    sim = sim or Simulator()
    app = FastAPI(title="provider simulator", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.simulator = sim
    answering = Answering(sim)
    add_anthropic_routes(app, answering)
    add_openai_routes(app, answering)
    add_oauth_routes(app, answering)
    add_device_auth_routes(app, answering)
    add_control_api(app, answering)
    app.exception_handler(RequestValidationError)(invalid_body)
    # Last: it answers every path no route above took.
    add_not_found(app, answering)
    return app


async def invalid_body(request: Request, exc: RequestValidationError) -> Response:
    """422 for a body that fails validation, without echoing it: the default handler
    echoes the input, which may hold a token."""
    errors = [{"loc": e.get("loc"), "msg": e.get("msg")} for e in exc.errors()]
    return JSONResponse({"detail": errors}, status_code=422)


def add_not_found(app: FastAPI, answering: Answering) -> None:
    """Any other path and method: the Anthropic 404, logged at debug level and kept in
    the request log (with the credential it named); a control path's is not recorded."""
    sim = answering.sim

    @app.api_route(
        "/{path:path}",
        methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
        include_in_schema=False,
    )
    async def not_found(request: Request, path: str) -> Response:
        outcome = Outcome(request)
        token = request.headers.get("x-api-key") or bearer_token(request)
        issued = sim.codex_access(token) if token else None
        # A rotated Codex access token still names its credential in the log.
        outcome.credential = issued[0] if issued else sim.credentials.get(token or "")
        response = anthropic_error(404, "not_found_error", "Not found")
        if request.url.path.startswith("/_control/"):
            response.headers["request-id"] = outcome.request_id
            return response
        return answering.finish(outcome, response, quiet=True)

"""FastAPI dependencies: how a route gets what the composition root (`server.runtime`) built.

Every route takes these instead of reading `request.app.state`, so a test replaces the whole
process with `app.dependency_overrides[get_services] = lambda: services`. It knows the container
(`server.services`) and nothing above it: the LTI routes' `LtiDep` is built on `ServicesDep` in
`server.lti.service`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from server.services import Services


def get_services(request: Request) -> Services:
    """The app's services (built in its lifespan by `server.runtime.build_services`)."""
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]

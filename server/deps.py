"""FastAPI dependencies: how a route gets what the composition root (`server.runtime`) built.

Every route takes these instead of reading `request.app.state`, so a test replaces the whole
process with `app.dependency_overrides[get_services] = lambda: services`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from server.lti.service import LtiService
from server.services import Services


def get_services(request: Request) -> Services:
    """The app's services (built in its lifespan by `server.runtime.build_services`)."""
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


def get_lti(services: ServicesDep) -> LtiService:
    """The LTI tool's service of the app.

    Raises:
        HTTPException(404): an app built without LTI (a test's services).
    """
    if services.lti is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "LTI is not set up on this server")
    return services.lti


LtiDep = Annotated[LtiService, Depends(get_lti)]
